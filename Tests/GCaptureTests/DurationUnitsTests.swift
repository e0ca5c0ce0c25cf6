import Dispatch
import GCaptureSupport
import XCTest

/// Duration in the units of Dispatch, NIO and the reports: the fraction of a second is kept (a hand
/// conversion through `components.seconds` alone made a 0.5 s limit 0), and a duration past Int64's
/// nanoseconds is held at the bound instead of trapping.
final class DurationUnitsTests: XCTestCase {
    func testTheFractionOfASecondIsKeptInEveryUnit() {
        let duration = Duration.milliseconds(1500)
        XCTAssertEqual(duration.inSeconds, 1.5, accuracy: 1e-12)
        XCTAssertEqual(duration.inMilliseconds, 1500, accuracy: 1e-9)
        XCTAssertEqual(Duration.milliseconds(500).inNanoseconds, 500_000_000)
        XCTAssertEqual(Duration.nanoseconds(7).inNanoseconds, 7)
        XCTAssertEqual(Duration.microseconds(-2500).inNanoseconds, -2_500_000)
        XCTAssertEqual(Duration.milliseconds(250).dispatchInterval, .nanoseconds(250_000_000))
    }

    func testADurationBeyondInt64NanosecondsIsHeldAtTheBound() {
        XCTAssertEqual(Duration.seconds(Int64.max / 2).inNanoseconds, .max)
        XCTAssertEqual(Duration.seconds(Int64.min / 2).inNanoseconds, .min)
    }
}
