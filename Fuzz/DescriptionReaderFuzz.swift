// libFuzzer entry for the description reader (scripts/fuzz-descriptions.sh builds it with the reader's
// sources and Yams, outside SwiftPM: a SwiftPM target cannot be a fuzzer). The reader must never crash,
// hang or report a place outside the file, whatever the bytes.
import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func descriptionReaderFuzz(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let data = Data(bytes: start, count: count)
    // Lines as YAML counts them: LF, CRLF and a lone CR each end one.
    var lineCount = 1
    for (index, byte) in data.enumerated() where byte == 0x0D || (byte == 0x0A && (index == 0 || data[data.startIndex + index - 1] != 0x0D)) {
        lineCount += 1
    }
    for safe in [false, true] {
        let result = DescriptionReader.read(data, file: "fuzz.yaml", safe: safe)
        for diagnostic in result.diagnostics {
            // Every finding has a place in the file (a line past the end only for "ends too early").
            precondition(diagnostic.position.line >= 1 && diagnostic.position.column >= 1, "\(diagnostic)")
            precondition(diagnostic.position.line <= lineCount + 1, "\(diagnostic) in a file of \(lineCount) lines")
            precondition(!diagnostic.message.isEmpty)
            _ = diagnostic.description
        }
        if result.errors.isEmpty {
            // A description without errors has what every run needs.
            guard let description = result.description else { preconditionFailure("no errors but no description") }
            precondition(description.version == 1 && !description.outputs.isEmpty)
            precondition([0, 90, 180, 270].contains(description.effectiveRotation))
            if let photo = description.outputs.photo {
                let name = photo.name.render(counter: 42, date: Date(timeIntervalSince1970: 0))
                precondition(!name.contains("/") && photo.name.counter(inName: name) == 42, name)
            }
            if safe {
                precondition(description.filters.isEmpty)
                if case .source = description.camera.choice { preconditionFailure("a custom source under --safe") }
                if let movie = description.outputs.movie { precondition(movie.maxSize != nil) }
            }
        }
        // Either form: every camera read from a file without errors is whole, and named in the cameras form.
        let cameras = DescriptionReader.readCameras(data, file: "fuzz.yaml", safe: safe)
        precondition(cameras.warningsByCamera.count == cameras.descriptions.count)
        for diagnostic in cameras.diagnostics {
            precondition(diagnostic.position.line >= 1 && diagnostic.position.column >= 1, "\(diagnostic)")
            precondition(diagnostic.position.line <= lineCount + 1, "\(diagnostic) in a file of \(lineCount) lines")
        }
        if cameras.errors.isEmpty {
            precondition((1...4).contains(cameras.descriptions.count))
            let names = cameras.descriptions.compactMap(\.cameraName)
            precondition(names.count == cameras.descriptions.count || cameras.descriptions.count == 1 && names.isEmpty)
            precondition(Set(names).count == names.count)
            for description in cameras.descriptions {
                precondition(description.version == 1 && !description.outputs.isEmpty)
                if safe, case .source = description.camera.choice { preconditionFailure("a custom source under --safe") }
            }
        }
    }
    return 0
}
