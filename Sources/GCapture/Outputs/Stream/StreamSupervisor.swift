import Foundation

extension CaptureStreamOutput {
    /// How a lost stream is retried: delays growing from `initialDelay` by `multiplier` per attempt, capped at
    /// `maxDelay`, each spread by ±`jitter` (a fraction) so that a fleet of publishers cut off by one server
    /// restart do not all knock at the same instant when it comes back.
    public struct ReconnectPolicy: Sendable, Equatable {
        public var initialDelay: Double
        public var maxDelay: Double
        public var multiplier: Double
        public var jitter: Double
        /// Attempts in a row after which the stream is `.failed`; nil retries for as long as it is published.
        public var maxAttempts: Int?

        public init(initialDelay: Double = 0.5, maxDelay: Double = 8, multiplier: Double = 2, jitter: Double = 0.2, maxAttempts: Int? = nil) {
            self.initialDelay = max(0, initialDelay)
            self.maxDelay = max(self.initialDelay, maxDelay)
            self.multiplier = max(1, multiplier)
            self.jitter = min(max(0, jitter), 1)
            self.maxAttempts = maxAttempts
        }

        public static let `default` = ReconnectPolicy()

        /// Seconds to wait before attempt `attempt` (1 for the first retry); `random` in 0...1.
        public func delay(beforeAttempt attempt: Int, random: Double = Double.random(in: 0...1)) -> Double {
            let step = initialDelay * pow(multiplier, Double(max(0, attempt - 1)))
            let spread = min(step, maxDelay) * (1 + jitter * (2 * random - 1))
            return min(max(0, spread), maxDelay)
        }
    }

    /// Where a published stream stands.
    public enum State: Sendable, Equatable, CustomStringConvertible {
        /// Not publishing.
        case idle
        /// The branch is attached and waiting for the server to take data.
        case connecting
        /// The server takes data: bytes leave the machine.
        case live
        /// The connection was lost or refused; attempt `attempt` starts at `nextRetry`.
        case reconnecting(attempt: Int, nextRetry: Date, reason: String)
        /// Given up (the policy's attempts ran out, or the stream cannot be built): not retried.
        case failed(CaptureError)

        public var description: String {
            switch self {
            case .idle: "idle"
            case .connecting: "connecting"
            case .live: "live"
            case .reconnecting(let attempt, let next, let reason):
                "reconnecting (attempt \(attempt) in \(String(format: "%.1f", max(0, next.timeIntervalSinceNow))) s: \(reason))"
            case .failed(let error): "failed: \(error)"
            }
        }

        /// The state's name alone: idle, connecting, live, reconnecting, failed.
        public var name: String {
            switch self {
            case .idle: "idle"
            case .connecting: "connecting"
            case .live: "live"
            case .reconnecting: "reconnecting"
            case .failed: "failed"
            }
        }
    }

    /// What the stream really did, summed over its connections.
    public struct Statistics: Sendable, Equatable {
        /// Bytes the sink says left for the server (RTMP, SRT), or that were written (HLS) or handed to the
        /// RTSP client, which keeps no count of its own.
        public var bytesSent: UInt64 = 0
        /// Encoded video frames of connections that went live.
        public var videoFramesSent = 0
        public var audioBuffersSent = 0
        /// Encoded frames the stream did not send: skipped while it waited for a key frame (joining the
        /// encoder, or after falling behind), or taken by a connection that never went live. Frames the
        /// encoder itself dropped behind a busy CPU are missing for every output alike.
        public var droppedFrames = 0
        /// Bits per second sent over the last second.
        public var bitRate: Double = 0
        /// Connections lost (or refused) while publishing.
        public var reconnects = 0
        /// Seconds spent live in total.
        public var liveSeconds: Double = 0
    }
}

/// Reads the byte counter out of a sink's "stats" structure in GStreamer's serialized form, which quotes
/// the structure and escapes its separators (`"GstRtmpConnectionStats\,\ out-bytes-total\=\(guint64\)1234..."`),
/// as it does the structures nested in it: rtmp2sink's bytes written to the socket once connected (0 before),
/// srtsink's bytes sent (per caller in listener mode: summed).
enum SinkStatistics {
    static let byteFields = ["out-bytes-total", "bytes-sent-total", "bytes-sent"]

    static func bytesSent(in serialized: String) -> UInt64? {
        let unescaped = serialized.replacingOccurrences(of: "\\", with: "")
        for field in byteFields {
            var total: UInt64?
            var rest = Substring(unescaped)
            while let range = rest.range(of: field + "=") {
                rest = rest[range.upperBound...]
                if rest.hasPrefix("(") , let close = rest.firstIndex(of: ")") { rest = rest[rest.index(after: close)...] }
                let digits = rest.prefix { $0.isNumber }
                if let value = UInt64(digits) { total = (total ?? 0) + value }
            }
            if let total { return total }
        }
        return nil
    }
}
