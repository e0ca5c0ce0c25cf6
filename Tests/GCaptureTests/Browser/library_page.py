"""The gallery of `gcapture serve` over its photo library, in headless Chromium driven by Selenium.

Usage: library_page.py URL FOLDER DOWNLOADS PHOTO
  URL        the page
  FOLDER     the folder the server serves (the library)
  DOWNLOADS  an empty folder where the browser saves the zip
  PHOTO      a photo outside FOLDER that this script copies in with cp (and then deletes)
Prints one JSON object per finding on stdout ({"check": ..., ...}); exits non-zero on the first failure,
saying what a person at the browser would have seen instead.
"""
import glob
import os
import subprocess
import sys
import time

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from browser import report, start_browser, wait_for

FIGURES = "[...document.querySelectorAll('#gallery figure')]"


def main(url, folder, downloads, photo):
    driver = start_browser(downloads=downloads)
    try:
        driver.set_script_timeout(20)
        driver.get(url)
        everything = wait_for(driver, "the gallery filled in", "return " + FIGURES + ".length > 0 ? " + FIGURES + ".length : null")
        report(check="gallery shown", items=everything)

        Select(driver.find_element(By.ID, "filter-type")).select_by_value("video")
        videos = wait_for(driver, "only videos in the gallery",
                          "const figures = " + FIGURES + ";"
                          "return figures.length > 0 && figures.length < " + str(everything) +
                          " && figures.every((figure) => figure.classList.contains('movie'))"
                          " ? figures.map((figure) => figure.dataset.name) : null")
        report(check="filtered to videos", names=videos)

        chosen = []
        for figure in driver.find_elements(By.CSS_SELECTOR, "#gallery figure")[:3]:
            figure.find_element(By.CSS_SELECTOR, "input.select").click()
            chosen.append(figure.get_attribute("data-name"))
        button = driver.find_element(By.ID, "download")
        if button.text != "Download 3 as zip":
            raise AssertionError(f"after choosing three the download button says {button.text!r}")
        button.click()
        deadline = time.monotonic() + 30
        archives = []
        while time.monotonic() < deadline:
            archives = [path for path in glob.glob(os.path.join(downloads, "*.zip"))]
            if archives and not glob.glob(os.path.join(downloads, "*.crdownload")):
                break
            time.sleep(0.1)
        if not archives:
            raise AssertionError(f"no zip was downloaded within 30 s (the folder holds {os.listdir(downloads)})")
        report(check="zip downloaded", names=chosen, path=archives[0])
        if not driver.execute_script("return document.getElementById('live') !== null && document.getElementById('gallery').children.length > 0"):
            raise AssertionError("the page went away when the zip was downloaded")

        # Another program's copy appears in the open page, and its deletion takes it away.
        Select(driver.find_element(By.ID, "filter-type")).select_by_value("all")
        wait_for(driver, "every item shown again", "return " + FIGURES + f".length === {everything}")
        name = os.path.basename(photo)
        copied = time.monotonic()
        subprocess.run(["cp", photo, folder], check=True)
        wait_for(driver, "the copied photo in the open page",
                 "return " + FIGURES + f".some((figure) => figure.dataset.name === {name!r})", timeout=10)
        appeared = time.monotonic() - copied
        report(check="copy appeared", name=name, seconds=round(appeared, 3))
        deleted = time.monotonic()
        os.remove(os.path.join(folder, name))
        wait_for(driver, "the deleted photo gone from the open page",
                 "return !" + FIGURES + f".some((figure) => figure.dataset.name === {name!r})", timeout=10)
        report(check="deletion disappeared", name=name, seconds=round(time.monotonic() - deleted, 3))

        # A favourite marked with the star is what the favourites filter shows.
        first = driver.find_elements(By.CSS_SELECTOR, "#gallery figure")[0]
        marked = first.get_attribute("data-name")
        first.find_element(By.CSS_SELECTOR, "button.favorite").click()
        wait_for(driver, "the star lit", "const star = document.querySelector(`#gallery figure[data-name=${JSON.stringify("
                 + repr(marked) + ")}] button.favorite`); return star && star.getAttribute('aria-pressed') === 'true'")
        driver.find_element(By.ID, "filter-favorites").click()
        favourites = wait_for(driver, "only the favourite shown",
                              "return " + FIGURES + ".length === 1 && " + FIGURES + f"[0].dataset.name === {marked!r}")
        report(check="favourite filtered", name=marked, ok=favourites)
    finally:
        driver.quit()


if __name__ == "__main__":
    try:
        main(*sys.argv[1:5])
    except AssertionError as failure:
        report(check="failed", error=str(failure))
        sys.exit(1)
