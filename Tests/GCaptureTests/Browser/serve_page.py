"""The operator's page of `gcapture serve` in a real browser: headless Chromium driven by Selenium.

Usage: serve_page.py URL            the live view, a photo, a movie and an event clip from the page
       serve_page.py --motion URL   the motion zone and the motion drawn over the live view
       serve_page.py --refused URL  the browser refuses the page (an https:// URL whose certificate it
                                    does not trust): its certificate error, never the page
Prints one JSON object per finding on stdout ({"check": ..., ...}); exits non-zero on the first failure,
saying what a person at the browser would have seen instead. Chromium trusts what $HOME/.pki/nssdb trusts.
"""
import sys
import time

from selenium.webdriver.common.by import By

from browser import report, start_browser, wait_for


def refused(url):
    driver = start_browser()
    try:
        driver.set_script_timeout(20)
        driver.get(url)
        error = wait_for(driver, "the certificate error page",
                         "const text = document.documentElement ? document.documentElement.outerHTML : '';"
                         "const found = text.match(/NET::ERR_CERT_[A-Z_]+|ERR_CERT_[A-Z_]+/);"
                         "return found ? found[0] : null")
        if driver.execute_script("return document.getElementById('live') !== null"):
            raise AssertionError("the page loaded although its certificate is not trusted")
        report(check="certificate refused", error=error)
    finally:
        driver.quit()


def main(url):
    driver = start_browser()
    try:
        driver.set_script_timeout(20)
        driver.get(url)
        # The page plays WebRTC by default (MJPEG is its fallback: webrtc_page.py checks that).
        wait_for(driver, "the live picture playing over WebRTC",
                 "const video = document.getElementById('live-video'), mode = document.getElementById('live-mode');"
                 "return mode !== null && mode.textContent.startsWith('Live view: WebRTC') && video.videoWidth > 0")
        wait_for(driver, "the status line filled in", "return document.getElementById('status').textContent !== 'connecting…'")
        live = driver.find_element(By.ID, "live-video")
        time.sleep(0.5)
        first = live.screenshot_as_png
        time.sleep(1)
        second = live.screenshot_as_png
        if first == second:
            raise AssertionError("two screenshots of the live view a second apart are identical: the picture is frozen")
        report(check="live view moves", first_bytes=len(first), second_bytes=len(second))

        driver.find_element(By.ID, "shutter").click()
        name = wait_for(driver, "the photo in the gallery",
                        "const image = document.querySelector('#gallery figure.photo img');"
                        "return image && image.complete && image.naturalWidth > 0"
                        " ? [image.closest('figure').dataset.name, image.naturalWidth, image.naturalHeight] : null", timeout=30)
        if max(name[1], name[2]) > 240:
            raise AssertionError(f"the gallery shows the photo at {name[1]}x{name[2]}, not as a thumbnail")
        report(check="photo in gallery", name=name[0], thumbnail=[name[1], name[2]])
        wait_for(driver, "the photo event in the page's log",
                 "return [...document.querySelectorAll('#events li')].some((line) => line.textContent.startsWith('photo'))")

        record = driver.find_element(By.ID, "record")
        record.click()
        wait_for(driver, "the record button turning into a stop button",
                 "return document.getElementById('record').textContent === 'Stop recording'")
        time.sleep(3)
        record.click()
        movie = wait_for(driver, "the movie in the gallery",
                         "const figure = document.querySelector('#gallery figure.movie');"
                         "return figure && document.getElementById('record').textContent === 'Record'"
                         " && !figure.textContent.includes('unfinished') ? figure.dataset.name : null", timeout=30)
        report(check="movie in gallery", name=movie)

        driver.find_element(By.ID, "trigger").click()
        clip = wait_for(driver, "the event clip marked in the gallery",
                        "const figure = document.querySelector('#gallery figure.movie.event');"
                        "return figure && figure.textContent.includes('(event)') ? figure.dataset.name : null", timeout=30)
        report(check="event clip in gallery", name=clip)
    finally:
        driver.quit()


def motion(url):
    """serve --motion: the motion output's zone and the motion it sees drawn over the live picture (the page
    learns of a motion going on when it opened from the status, of later ones from the events)."""
    driver = start_browser()
    try:
        driver.set_script_timeout(20)
        # Over the MJPEG picture (the one the areas were first drawn over; WebRTC's video is drawn over alike).
        driver.get(url + ("&" if "?" in url else "?") + "live=mjpeg")
        wait_for(driver, "the live picture showing",
                 "const live = document.getElementById('live'); return live && live.naturalWidth > 0")
        zone = wait_for(driver, "the motion zone drawn over the live picture",
                        "const zone = document.querySelector('#areas .zone'); if (!zone) return null;"
                        "const box = zone.getBoundingClientRect(), live = document.getElementById('live').getBoundingClientRect();"
                        "return box.width > 10 && box.height > 10 && box.left >= live.left - 1 && box.right <= live.right + 1"
                        " ? [box.width, box.height] : null")
        report(check="zone drawn", size=zone)
        seen = wait_for(driver, "the motion drawn over the live picture",
                        "const box = document.querySelector('#areas .motion'); return box ? box.getBoundingClientRect().width : null",
                        timeout=30)
        report(check="motion drawn", width=seen)
    finally:
        driver.quit()


if __name__ == "__main__":
    try:
        if sys.argv[1] == "--refused":
            refused(sys.argv[2])
        elif sys.argv[1] == "--motion":
            motion(sys.argv[2])
        else:
            main(sys.argv[1])
    except AssertionError as failure:
        report(check="failed", error=str(failure))
        sys.exit(1)
