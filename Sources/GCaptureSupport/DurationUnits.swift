import Dispatch

// Swift's Duration in the units of the APIs around it (Dispatch deadlines, NIO's TimeAmount, JSON figures).
// In one place because a hand conversion that reads only `components.seconds` drops the fraction without a
// word: a limit of 0.5 s becomes 0.
extension Duration {
    /// In seconds, the fraction included.
    public var inSeconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }

    /// In milliseconds, the fraction included.
    public var inMilliseconds: Double { inSeconds * 1000 }

    /// In whole nanoseconds, the rest truncated; held at Int64's bounds for a duration longer than they reach
    /// (about 292 years).
    public var inNanoseconds: Int64 {
        let (whole, overflow) = components.seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow { return components.seconds < 0 ? .min : .max }
        let (sum, sumOverflow) = whole.addingReportingOverflow(components.attoseconds / 1_000_000_000)
        if sumOverflow { return whole < 0 ? .min : .max }
        return sum
    }

    /// As a Dispatch interval, to the nanosecond.
    public var dispatchInterval: DispatchTimeInterval { .nanoseconds(Int(inNanoseconds)) }
}
