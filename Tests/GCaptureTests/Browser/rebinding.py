"""DNS rebinding against `gcapture serve` without a token, in a real browser: headless Chromium resolves the
attacker's names to 127.0.0.1 (as the attacker's DNS would, after the page has loaded), so the browser sends
them as the Host; the server must give such a page nothing, neither the page nor its API.

Usage: rebinding.py PORT
Prints one JSON object per finding on stdout ({"check": ...}); exits non-zero on the first failure.
"""
import sys

from browser import report, start_browser, wait_for

NAMES = ("127.0.0.1.rebind.example", "127.0.0.1rebind.example")


# What the page's own script can get from the server: the status and a photo, from the page's origin.
PROBE = """
const done = arguments[arguments.length - 1];
Promise.all([
  fetch('/api/status').then((r) => r.status).catch(() => 0),
  fetch('/api/command', {method: 'POST', headers: {'Content-Type': 'application/json'},
                         body: JSON.stringify({command: 'photo'})}).then((r) => r.status).catch(() => 0),
]).then(done);
"""


def main(port):
    driver = start_browser("--host-resolver-rules=" + ", ".join(f"MAP {name} 127.0.0.1" for name in NAMES))
    try:
        driver.set_script_timeout(20)
        for name in NAMES:
            driver.get(f"http://{name}:{port}/")
            text = wait_for(driver, f"an answer at {name}", "return document.body && document.body.innerText")
            if "localhost only" not in text or document_has_app(driver):
                raise AssertionError(f"the page at {name} was served: {text[:200]!r}")
            statuses = driver.execute_async_script(PROBE)
            if statuses != [403, 403]:
                raise AssertionError(f"the rebinding page's requests got {statuses}, not [403, 403]")
            report(check=f"refused under {name}", statuses=statuses)
        driver.get(f"http://localhost:{port}/")
        wait_for(driver, "the page at localhost", "return document.getElementById('shutter') !== null")
        status = driver.execute_async_script(
            "const done = arguments[arguments.length - 1]; fetch('/api/status').then((r) => done(r.status)).catch(() => done(0));")
        if status != 200:
            raise AssertionError(f"the page at localhost got {status} for its status")
        report(check="served at localhost")
    finally:
        driver.quit()


def document_has_app(driver):
    return driver.execute_script("return document.getElementById('shutter') !== null")


if __name__ == "__main__":
    main(int(sys.argv[1]))
