"""The operator's page of a run with several cameras, in headless Chromium driven by Selenium.

Usage: cameras_page.py URL BLACK WHITE   BLACK and WHITE name a camera showing black and one showing white,
                                          BLACK picked at start, WHITE with a photo output
Checks the row of small live views (each its camera's picture), the big view (the picked camera's), a press on
WHITE's small view picking it, the big view following, and the shutter then taking WHITE's photo. Prints one
JSON object per finding on stdout ({"check": ...}); exits non-zero on the first failure.
"""
import sys

from selenium.webdriver.common.by import By

from browser import report, start_browser, wait_for

# The mean luma of what an element shows, drawn into a canvas (the pictures are the page's own origin).
LUMA = """
const width = element.videoWidth || element.naturalWidth, height = element.videoHeight || element.naturalHeight;
if (!width || !height) return null;
const canvas = document.createElement('canvas');
canvas.width = 32; canvas.height = 18;
const context = canvas.getContext('2d');
context.drawImage(element, 0, 0, 32, 18);
const pixels = context.getImageData(0, 0, 32, 18).data;
let sum = 0;
for (let i = 0; i < pixels.length; i += 4) sum += 0.299 * pixels[i] + 0.587 * pixels[i + 1] + 0.114 * pixels[i + 2];
return sum / (pixels.length / 4);
"""


def wait_for_luma(driver, what, selector, dark, timeout=20):
    script = ("const e = document.querySelector(" + repr(selector) + "); if (!e) return null;"
              "const value = (function(element) {" + LUMA + "})(e);"
              "return value === null ? null : (" + ("value < 40" if dark else "value > 200") + " ? [value] : null);")
    return wait_for(driver, what, script, timeout=timeout)[0]


def main(url, black, white):
    driver = start_browser()
    try:
        driver.set_script_timeout(20)
        driver.get(url)
        wait_for(driver, "a small live view per camera",
                 "const strip = document.getElementById('cameras');"
                 "return !strip.hidden && strip.querySelectorAll('button img').length === 2")
        tile = lambda name: f'#cameras button[data-camera="{name}"]'
        black_luma = wait_for_luma(driver, f"{black}'s small view showing black", tile(black) + " img", dark=True)
        white_luma = wait_for_luma(driver, f"{white}'s small view showing white", tile(white) + " img", dark=False)
        report(check="each small view shows its camera", black=black_luma, white=white_luma)

        wait_for(driver, "the big view playing",
                 "return document.getElementById('live-mode').textContent.startsWith('Live view:')")
        big = "#live-video" if driver.execute_script("return document.getElementById('live-mode').textContent.startsWith('Live view: WebRTC')") else "#live"
        report(check="big view shows the picked camera", mode=big,
               luma=wait_for_luma(driver, f"the big view showing {black}, picked at start", big, dark=True))

        driver.find_element(By.CSS_SELECTOR, tile(white)).click()
        wait_for(driver, f"{white}'s small view marked picked",
                 f"return document.querySelector('{tile(white)}').getAttribute('aria-pressed') === 'true'"
                 f" && document.getElementById('status').textContent.startsWith('{white}: ')")
        report(check="a press picks the door")
        report(check="big view follows the pick",
               luma=wait_for_luma(driver, f"the big view showing {white} once picked", big, dark=False, timeout=30))

        driver.find_element(By.ID, "shutter").click()
        name = wait_for(driver, "the photo in the gallery",
                        "const image = document.querySelector('#gallery figure.photo img');"
                        "return image && image.complete && image.naturalWidth > 0 ? image.closest('figure').dataset.name : null",
                        timeout=30)
        if not name.startswith(white):
            raise AssertionError(f"the shutter took {name}, not a photo of {white}")
        report(check="the shutter takes the door's photo", name=name)
    finally:
        driver.quit()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
