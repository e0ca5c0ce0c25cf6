import Foundation
import GStreamerKit

/// What a crash or power cut left behind, and how a finished file is made to outlast the next one.
extension CaptureMovieFileOutput {
    /// Posted when a recording interrupted by a crash or power cut has been rebuilt from its sidecar (at the
    /// next start of a recording in its folder, before that recording begins). `object` is the output that
    /// recovered it (nil from `recoverInterruptedRecordings(in:)`); userInfo holds the movie's path under
    /// `recoveredMoviePathKey` (String) and its duration in seconds under `recoveredMovieDurationKey` (Double).
    public static let didRecoverMovieNotification = Notification.Name("GCaptureMovieFileOutputDidRecoverMovie")
    /// Posted once for an interrupted recording whose sidecar cannot be rebuilt: userInfo holds the movie's
    /// path under `recoveredMoviePathKey`, the `CaptureError` under `recoveryErrorKey`, and where the sidecar
    /// was set aside (hidden, `.NAME.gcapture-recovery.failed.mkv`, never tried again) under
    /// `failedSidecarPathKey` when it could be moved.
    public static let didFailToRecoverMovieNotification = Notification.Name("GCaptureMovieFileOutputDidFailToRecoverMovie")
    public static let recoveredMoviePathKey = "path"
    public static let recoveredMovieDurationKey = "duration"
    public static let recoveryErrorKey = "error"
    public static let failedSidecarPathKey = "failedSidecarPath"

    /// Removes the movie at `url` and what a crash of its recording left beside it (the sidecar that would
    /// otherwise be recovered into `url` at the next start), so that a recording can be made to `url`.
    /// Fails, removing nothing, while a recording (in this process or another) writes it.
    public static func removeMovie(at url: URL) throws(CaptureError) {
        let sidecar = MovieRecovery.sidecarURL(for: url)
        if SidecarLock.isHeld(on: sidecar) {
            throw .recordingFailed(reason: "\(url.path) is being recorded; it cannot be removed", underlying: nil)
        }
        for file in [url, sidecar] where FileManager.default.fileExists(atPath: file.path) {
            do { try FileManager.default.removeItem(at: file) } catch {
                throw .fileAccessFailed("cannot remove \(file.path): \((error as NSError).localizedDescription)")
            }
        }
    }

    /// Recovers every interrupted recording in `directory` (see MovieRecovery); blocks while remuxing. Each
    /// is announced (didRecoverMovieNotification, didFailToRecoverMovieNotification, `object` nil).
    @discardableResult
    public static func recoverInterruptedRecordings(in directory: URL) -> [Result<URL, CaptureError>] {
        MovieRecovery.recoverAll(in: directory).map { outcome in
            announce(outcome, by: nil)
            return switch outcome {
            case .recovered(let movie, _): .success(movie)
            case .failed(_, _, let error): .failure(error)
            }
        }
    }

    /// Before a recording to `url` starts (on the queue that settles files): recovers and announces what a
    /// crash left in its folder. Returns whether `url` itself is now a recovered take, which the new
    /// recording must not replace.
    func recoverInterruptedRecordings(before url: URL) -> Bool {
        let outcomes = MovieRecovery.recoverAll(in: url.deletingLastPathComponent())
        outcomes.forEach { Self.announce($0, by: self) }
        let path = url.standardizedFileURL.path
        return outcomes.contains { if case .recovered(let movie, _) = $0 { movie.standardizedFileURL.path == path } else { false } }
    }

    private static func announce(_ outcome: MovieRecovery.Outcome, by output: CaptureMovieFileOutput?) {
        switch outcome {
        case .recovered(let movie, let duration):
            Log.movie.notice("recovered \(movie.path) (\(String(format: "%.2f", duration)) s) from an interrupted recording")
            NotificationCenter.default.post(name: didRecoverMovieNotification, object: output,
                                            userInfo: [recoveredMoviePathKey: movie.path, recoveredMovieDurationKey: duration])
        case .failed(let movie, let aside, let error):
            Log.movie.error("cannot recover \(movie.path) from its sidecar: \(error)")
            var info: [String: any Sendable] = [recoveredMoviePathKey: movie.path, recoveryErrorKey: error]
            if let aside { info[failedSidecarPathKey] = aside.path }
            NotificationCenter.default.post(name: didFailToRecoverMovieNotification, object: output, userInfo: info)
        }
    }

    static func settleFiles(of url: URL, encoding: MovieEncoding, stats: RecordingTimeline.Statistics,
                            error: CaptureError?, drained: Bool, defragmentWithin: TimeInterval?) -> CaptureError? {
        let sidecar = MovieRecovery.sidecarURL(for: url)
        if stats.frames == 0 {
            // Without a frame there is no playable movie: leave nothing behind, and do not call it a
            // success (a size limit smaller than the first frame stops the recording before it).
            try? FileManager.default.removeItem(at: url)
            try? FileManager.default.removeItem(at: sidecar)
            if error == .maximumFileSizeReached {
                return .invalidSettings("the maximum file size is smaller than the movie's header and first frame")
            }
            return error.flatMap { $0.recordingFinishedSuccessfully ? nil : $0 } ?? .noFramesRecorded
        }
        // mp4mux gives an audio track that never received a sample an empty sample description, which
        // players (ffprobe, qtdemux) refuse: such a movie is rebuilt from the sidecar without that track.
        let emptyAudioTrack = encoding.withAudio && stats.audioBuffers == 0 && encoding.container == .mp4
        if drained, error == nil || error!.recordingFinishedSuccessfully, !emptyAudioTrack {
            var remuxed = false
            if let defragmentWithin, encoding.container == .mp4 {
                // The fragmented file is complete and stays if this fails or runs out of time: it plays and
                // seeks too. Its own recording: the tracks are known, no discoverer needed.
                do throws(CaptureError) {
                    try MovieRemux.remux(url, as: .mp4, tracks: .init(video: true, audio: stats.audioBuffers > 0),
                                         replacing: url, rotation: encoding.displayRotation, timeout: defragmentWithin)
                    remuxed = true
                } catch {
                    Log.movie.warning("\(url.lastPathComponent) stays fragmented: \(error)")
                }
            }
            // The sidecar goes only once the movie is durable under its name (the remux made its copy so):
            // a power cut right after "finished" must leave the movie or the means to rebuild it.
            if let failure = remuxed ? nil : DurableFile.sync(url.path) {
                Log.movie.warning("\(url.path) may not survive a power cut (\(failure)): its recovery sidecar is kept")
            } else {
                DurableFile.remove(sidecar.path)
            }
        } else if FileManager.default.fileExists(atPath: sidecar.path) {
            // Not finalized cleanly (a write failed, the microphone vanished, the drain timed out): the
            // sidecar holds every frame that was encoded, so the movie is rebuilt from it, without a track
            // that never received data.
            let why = emptyAudioTrack ? "its audio track never received a sample"
                : error.map { "\($0)" } ?? "its end did not reach the file in time"
            Log.movie.warning("\(url.lastPathComponent) is rebuilt from its recovery sidecar: \(why)")
            do throws(CaptureError) {
                try MovieRecovery.recover(url, includeAudio: stats.audioBuffers > 0)
            } catch let recoveryError {
                // No room to rebuild it (a full disk): the fragmented movie, cut after its last complete
                // fragment, is what plays. The sidecar stays for a later start only where the movie has nothing.
                if MovieFiles.trimToLastCompleteBox(url), DurableFile.sync(url.path) == nil {
                    DurableFile.remove(sidecar.path)
                } else if !MovieFiles.holdsFrames(sidecar) {
                    try? FileManager.default.removeItem(at: url)
                    try? FileManager.default.removeItem(at: sidecar)
                }
                return error ?? recoveryError
            }
        }
        return error
    }
}
