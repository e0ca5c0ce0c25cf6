import Foundation
import GStreamerKit

/// A deferred photo: its proxy is on disk; its final image replaces it when processing finishes.
public struct DeferredPhoto: Sendable {
    public let identifier: String
    public let fileURL: URL
    public let requestDate: Date
    public let isFinished: Bool
}

/// Keeps deferred work on disk next to the photos (`.gcapture-deferred/`), so that a crash or a restart
/// loses none of it: `pending/<id>/` holds the job and its raw frames, `finished/<id>.json` what was done.
enum DeferredPhotoStore {
    private struct FrameRecord: Codable { var caps: String; var presentationTime: UInt64; var file: String }
    private struct JobRecord: Codable { var job: PhotoJob; var frames: [FrameRecord] }

    static func store(for photoDirectory: URL) -> URL {
        photoDirectory.appendingPathComponent(".gcapture-deferred", isDirectory: true)
    }

    /// Saves a job and its frames; the folder appears complete (renamed into place) or not at all.
    static func save(_ job: PhotoJob, frames: [CapturedFrame], in photoDirectory: URL) throws(CaptureError) -> URL {
        let store = store(for: photoDirectory)
        let identifier = UUID().uuidString
        let staging = store.appendingPathComponent("staging-\(identifier)", isDirectory: true)
        let final = store.appendingPathComponent("pending/\(identifier)", isDirectory: true)
        do {
            try FileManager.default.createDirectory(at: staging, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(at: final.deletingLastPathComponent(), withIntermediateDirectories: true)
            var records: [FrameRecord] = []
            for (index, frame) in frames.enumerated() {
                let name = "frame-\(index).raw"
                let path = staging.appendingPathComponent(name).path
                let failure: String? = frame.sample.withBytes { PhotoProcessor.writeFile($0, to: path) } ?? "the frame cannot be mapped"
                if let failure {
                    throw CocoaError(.fileWriteUnknown, userInfo: [NSLocalizedDescriptionKey: "\(path): \(failure)"])
                }
                records.append(FrameRecord(caps: frame.caps.description, presentationTime: frame.presentationTime, file: name))
            }
            try JSONEncoder().encode(JobRecord(job: job, frames: records)).write(to: staging.appendingPathComponent("job.json"))
            try FileManager.default.moveItem(at: staging, to: final)
            return final
        } catch {
            try? FileManager.default.removeItem(at: staging)
            throw .invalidSettings("cannot keep the deferred photo's frames in \(store.path): \(error.localizedDescription)")
        }
    }

    /// Pending job folders in a photo directory, oldest first.
    static func pendingJobs(in photoDirectory: URL) -> [URL] {
        let pending = store(for: photoDirectory).appendingPathComponent("pending", isDirectory: true)
        let names = (try? FileManager.default.contentsOfDirectory(atPath: pending.path)) ?? []
        return names.map { pending.appendingPathComponent($0, isDirectory: true) }.sorted {
            (modificationDate($0) ?? .distantPast) < (modificationDate($1) ?? .distantPast)
        }
    }

    static func load(_ folder: URL) throws(CaptureError) -> (PhotoJob, [CapturedFrame]) {
        do {
            let record = try JSONDecoder().decode(JobRecord.self, from: Data(contentsOf: folder.appendingPathComponent("job.json")))
            let frames = try record.frames.map { frame in
                let caps = try Caps(frame.caps)
                guard let info = VideoInfo(caps: caps) else { throw CocoaError(.fileReadCorruptFile) }
                let bytes = try Data(contentsOf: folder.appendingPathComponent(frame.file), options: .alwaysMapped)
                guard let sample = Sample(caps: caps, presentationTime: ClockTime(frame.presentationTime), byteCount: bytes.count,
                                          fill: { bytes.copyBytes(to: $0) }) else { throw CocoaError(.fileReadCorruptFile) }
                return CapturedFrame(sample: sample, presentationTime: frame.presentationTime, caps: caps, info: info)
            }
            return (record.job, frames)
        } catch {
            throw .fileAccessFailed("deferred photo job \(folder.lastPathComponent) is unreadable: \(error)")
        }
    }

    /// Records the job as finished and removes its frames.
    static func finish(_ folder: URL) {
        let finished = folder.deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("finished", isDirectory: true)
        try? FileManager.default.createDirectory(at: finished, withIntermediateDirectories: true)
        try? FileManager.default.moveItem(at: folder.appendingPathComponent("job.json"),
                                          to: finished.appendingPathComponent("\(folder.lastPathComponent).json"))
        try? FileManager.default.removeItem(at: folder)
    }

    static func list(in photoDirectory: URL) -> [DeferredPhoto] {
        let store = store(for: photoDirectory)
        let pending = pendingJobs(in: photoDirectory).compactMap { folder -> DeferredPhoto? in
            guard let job = try? load(folder).0 else { return nil }
            return DeferredPhoto(identifier: folder.lastPathComponent, fileURL: job.fileURL ?? folder,
                                 requestDate: job.requestDate, isFinished: false)
        }
        let finishedFolder = store.appendingPathComponent("finished", isDirectory: true)
        let finished = ((try? FileManager.default.contentsOfDirectory(atPath: finishedFolder.path)) ?? []).compactMap { name -> DeferredPhoto? in
            guard let data = try? Data(contentsOf: finishedFolder.appendingPathComponent(name)),
                  let record = try? JSONDecoder().decode(JobRecord.self, from: data) else { return nil }
            return DeferredPhoto(identifier: String(name.dropLast(5)), fileURL: record.job.fileURL ?? finishedFolder,
                                 requestDate: record.job.requestDate, isFinished: true)
        }
        return (pending + finished).sorted { $0.requestDate < $1.requestDate }
    }

    private static func modificationDate(_ url: URL) -> Date? {
        (try? FileManager.default.attributesOfItem(atPath: url.path))?[.modificationDate] as? Date
    }
}
