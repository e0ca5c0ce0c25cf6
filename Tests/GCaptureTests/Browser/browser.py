"""What the browser tests share: headless Chromium from Debian driven by Selenium, findings as JSON lines."""
import json
import time

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service


def report(**fields):
    print(json.dumps(fields), flush=True)


def wait_for(driver, what, script, timeout=20):
    """Polls a JavaScript condition: the page streams MJPEG, so it never 'finishes loading'."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = driver.execute_script(script)
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"{what} did not happen within {timeout} s")


def start_browser(*extra_arguments, downloads=None):
    """downloads: a folder where the browser saves downloads without asking."""
    options = Options()
    if downloads:
        options.add_experimental_option("prefs", {"download.default_directory": downloads, "download.prompt_for_download": False})
    options.binary_location = "/usr/bin/chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1000",
                     *extra_arguments):
        options.add_argument(argument)
    # The live view never ends, so 'normal' (wait for the load event) would wait forever.
    options.page_load_strategy = "none"
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    if downloads:
        driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": downloads})
    return driver
