"""The operator's live view in headless Chromium, over WebRTC or MJPEG, with its latency read from the picture.

Usage: webrtc_page.py live URL MODE SAMPLES   MODE webrtc or mjpeg (the page's ?live=): the picture moves, and
                                              the capture time the test camera (--stamp-time) wrote into each
                                              frame, read back from a canvas, against the wall clock: glass to
                                              glass latency over SAMPLES frames
       webrtc_page.py fallback URL            a browser without WebRTC gets MJPEG, and the page says so
Prints one JSON object per finding on stdout ({"check": ..., ...}); exits non-zero on the first failure.
"""
import statistics
import sys
import time

from selenium.webdriver.common.by import By

from browser import report, start_browser, wait_for

# Reads CaptureTimeStamp (Sources/GCapture/Devices/TestDevices.swift) from the element showing the picture:
# cells across the top, white and black references, the time's 32 bits, 4 check bits. The cells' pitch is
# the first (white) cell's width. Returns the stamp (CLOCK_MONOTONIC ms mod 2^32) or null.
READ_STAMP = """
function readStamp(element, canvas) {
  const width = element.videoWidth || element.naturalWidth, height = element.videoHeight || element.naturalHeight;
  if (!width || !height) return null;
  canvas.width = width; canvas.height = Math.min(height, 96);
  const context = canvas.getContext("2d", { willReadFrequently: true });
  context.drawImage(element, 0, 0, width, height, 0, 0, width, height);
  const pixels = context.getImageData(0, 0, canvas.width, canvas.height).data;
  // The stamp is written in luma only: the colours of the picture under it stay, so luma it is (BT.601).
  const luma = (x, y) => {
    const i = (Math.round(y) * canvas.width + Math.round(x)) * 4;
    return 0.299 * pixels[i] + 0.587 * pixels[i + 1] + 0.114 * pixels[i + 2];
  };
  let pitch = 0;
  while (pitch < width && luma(pitch, 2) > 128) pitch++;
  if (pitch < 4 || pitch * 38 > width) return null;
  const white = luma(pitch / 2, pitch / 2), black = luma(pitch * 1.5, pitch / 2);
  if (white - black < 60) return null;
  // A cell between black and white (a frame half drawn, a blurred edge) makes the whole stamp unreadable.
  const middle = (white + black) / 2, margin = (white - black) / 4;
  const levels = [];
  for (let index = 2; index < 38; index++) levels.push(luma(pitch * (index + 0.5), pitch / 2));
  if (levels.some((level) => Math.abs(level - middle) < margin)) return null;
  const bit = (index) => levels[index - 2] > middle ? 1 : 0;
  let time = 0;
  for (let index = 2; index < 34; index++) time = time * 2 + bit(index);
  let check = 0;
  for (let index = 34; index < 38; index++) check = check * 2 + bit(index);
  let sum = 0;
  for (let nibble = 0; nibble < 8; nibble++) sum += Math.floor(time / Math.pow(16, nibble)) % 16;
  return sum % 16 === check ? time : null;
}
"""

# Collects `samples` latencies: for each new picture shown, the wall clock now (as CLOCK_MONOTONIC, through
# `offset`) minus the stamp. WebRTC's video tells of each frame presented; MJPEG's image is polled.
MEASURE = READ_STAMP + """
const [elementId, offset, samples, done] = arguments;
const element = document.getElementById(elementId), canvas = document.createElement("canvas");
const latencies = [], stamps = new Set();
let unreadable = 0;
function sample() {
  const stamp = readStamp(element, canvas);
  if (stamp === null) { unreadable++; return; }
  if (stamps.has(stamp)) return;
  stamps.add(stamp);
  const now = (Date.now() - offset) % 4294967296;
  latencies.push(((now - stamp) % 4294967296 + 4294967296) % 4294967296);
}
const finish = () => done({ latencies, unreadable });
setTimeout(finish, 20000);
if (element.requestVideoFrameCallback) {
  const each = () => { sample(); if (latencies.length >= samples) finish(); else element.requestVideoFrameCallback(each); };
  element.requestVideoFrameCallback(each);
} else {
  const timer = setInterval(() => { sample(); if (latencies.length >= samples) { clearInterval(timer); finish(); } }, 5);
}
"""


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def live(url, mode, samples):
    driver = start_browser()
    try:
        driver.set_script_timeout(40)
        driver.get(url + ("&" if "?" in url else "?") + "live=" + mode)
        label = "WebRTC" if mode == "webrtc" else "MJPEG"
        element = "live-video" if mode == "webrtc" else "live"
        wait_for(driver, f"the live picture playing over {label}",
                 f"const shown = document.getElementById('{element}'), mode = document.getElementById('live-mode');"
                 f"return mode !== null && mode.textContent.startsWith('Live view: {label}')"
                 " && (shown.videoWidth || shown.naturalWidth) > 0")
        shown = driver.find_element(By.ID, element)
        time.sleep(0.5)
        first = shown.screenshot_as_png
        time.sleep(1)
        second = shown.screenshot_as_png
        if first == second:
            raise AssertionError(f"two screenshots of the {label} live view a second apart are identical: the picture is frozen")
        report(check="live view moves", mode=label)
        # CLOCK_MONOTONIC is the stamps' clock; the page knows only the wall clock: their difference, now.
        offset = time.time() * 1000 - time.clock_gettime(time.CLOCK_MONOTONIC) * 1000
        measured = driver.execute_async_script(MEASURE, element, offset, samples)
        latencies = measured["latencies"]
        if len(latencies) < samples:
            raise AssertionError(f"only {len(latencies)} stamps of {samples} read from the {label} picture ({measured['unreadable']} unreadable)")
        report(check="latency", mode=label, samples=len(latencies), p50=percentile(latencies, 0.5), p95=percentile(latencies, 0.95),
               maximum=max(latencies), mean=statistics.fmean(latencies), unreadable=measured["unreadable"])
    finally:
        driver.quit()


def fallback(url):
    driver = start_browser()
    try:
        driver.set_script_timeout(20)
        # A browser without WebRTC, from the page's first line on.
        driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument",
                               {"source": "delete window.RTCPeerConnection; delete window.webkitRTCPeerConnection;"})
        driver.get(url)
        said = wait_for(driver, "the MJPEG picture, said so",
                        "const live = document.getElementById('live'), mode = document.getElementById('live-mode');"
                        "return mode !== null && mode.textContent.startsWith('Live view: MJPEG') && live.naturalWidth > 0"
                        " && !live.hidden ? mode.textContent : null")
        if not driver.execute_script("return document.getElementById('live-video').hidden"):
            raise AssertionError("the WebRTC video is shown although the browser has no WebRTC")
        report(check="fell back to MJPEG", said=said)
    finally:
        driver.quit()


if __name__ == "__main__":
    try:
        if sys.argv[1] == "live":
            live(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        elif sys.argv[1] == "fallback":
            fallback(sys.argv[2])
        else:
            raise AssertionError(f"unknown check {sys.argv[1]}")
    except AssertionError as failure:
        report(check="failed", error=str(failure))
        sys.exit(1)
