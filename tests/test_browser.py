"""The choreography page in a real browser: headless Chromium through selenium.

Needs the Debian packages ``chromium`` and ``chromium-driver`` (/usr/bin/chromium,
/usr/bin/chromedriver) and the pip package ``selenium``; skipped without them.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from gemm_ladder.choreography.sim import run_what_if, simulate_step
from gemm_ladder.choreography.viz import write_page

pytestmark = pytest.mark.browser

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def _requirements() -> str | None:
    if not Path(CHROMIUM).exists():
        return f"{CHROMIUM} missing (apt-get install chromium)"
    if not Path(CHROMEDRIVER).exists():
        return f"{CHROMEDRIVER} missing (apt-get install chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium missing (pip install selenium)"
    return None


@pytest.fixture(scope="module")
def driver():
    why = _requirements()
    if why:
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="gl-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1500,1300"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    d.set_page_load_timeout(60)
    try:
        yield d
    finally:
        d.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    tls = [simulate_step(s, k_tiles=16).timeline for s in (4, 5, 6, 7, 8, 9)]
    tls.append(run_what_if("both-phase-0").timeline)
    return write_page(tls, tmp_path_factory.mktemp("page") / "choreography.html",
                      title="choreography (browser test)", pair=(2, 3))


def _severe(driver) -> list:
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def test_page_steps_through_events_without_console_errors(driver, page, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    driver.get(page.resolve().as_uri())
    WebDriverWait(driver, 30).until(
        lambda d: d.execute_script("return document.body.getAttribute('data-ready')") == "1")

    # lanes drawn, one per role, for both panels (lockstep step 6 and warp-specialized step 7)
    lanes_a = {g.get_attribute("data-lane") for g in driver.find_elements(By.CSS_SELECTOR, "#svg-a g.lane")}
    lanes_b = {g.get_attribute("data-lane") for g in driver.find_elements(By.CSS_SELECTOR, "#svg-b g.lane")}
    assert lanes_a == {"cta0/team", "cta0/tma"}
    assert lanes_b == {"cta0/producer", "cta0/consumer0", "cta0/writeback", "cta0/tma"}
    assert len(driver.find_elements(By.CSS_SELECTOR, "#svg-b rect.sp.mma")) > 3
    cards = driver.find_element(By.ID, "kpi-cards")
    assert "TENSOR-CORE BUSY" in cards.text.upper()
    assert len(cards.find_elements(By.CSS_SELECTOR, ".kpi-col")) == 2

    # step through start-up on the warp-specialized panel
    Select(driver.find_element(By.ID, "step-target")).select_by_value("b")
    idx = driver.find_element(By.ID, "event-index")
    desc = driver.find_element(By.ID, "event-desc")
    assert idx.text.startswith("1 / ")
    first_desc = desc.text
    assert "cta0/producer" in first_desc and "passes at once" in first_desc   # wait(phase=1) passes
    cur0 = driver.find_element(By.ID, "current-b").get_attribute("data-span")

    nxt = driver.find_element(By.ID, "next-event")
    seen = [desc.text]
    for _ in range(12):
        nxt.click()
        seen.append(desc.text)
    assert idx.text.startswith("13 / ")
    assert driver.find_element(By.ID, "current-b").get_attribute("data-span") != cur0
    # ... while the consumer's first wait (phase 0) blocks
    assert any("cta0/consumer0" in s and "tma2mma[0] parity 0: blocks" in s for s in seen), seen
    driver.find_element(By.ID, "prev-event").click()
    assert idx.text.startswith("12 / ")
    assert desc.text == seen[-2]

    # the slider jumps; the time window follows the cursor
    win_before = driver.find_element(By.ID, "win-label").text
    driver.execute_script(
        "var s=document.getElementById('event-slider'); s.value=s.max; s.dispatchEvent(new Event('input'));")
    assert driver.find_element(By.ID, "win-label").text != win_before
    n = int(idx.text.split("/")[1])
    assert idx.text.startswith(f"{n} / ")

    # zoom, fit, panel switch and the what-if timeline render without errors
    driver.find_element(By.ID, "zoom-in").click()
    driver.find_element(By.ID, "fit").click()
    Select(driver.find_element(By.ID, "select-a")).select_by_index(6)
    assert "deadlock" in driver.find_element(By.ID, "verdict-a").text

    assert _severe(driver) == []
    shot = tmp_path / "choreography.png"
    assert driver.save_screenshot(str(shot))
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
