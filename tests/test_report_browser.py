"""The HTML report of a real run, opened in headless Chromium (Debian's ``chromium`` and
``chromium-driver``; ``make browser`` installs them). A missing browser fails, never skips; without
the selenium package (a dev extra) the test is skipped, saying so."""

from __future__ import annotations

import os

import msgspec
import pytest
from fakes import XSS_IMG, XSS_SCRIPT

from seamscope.analyze.receipt import make_receipt
from seamscope.model.ledger import RegionEvent
from seamscope.render.html import write_html_report
from seamscope.render.notebook import notebook_html

pytestmark = [pytest.mark.browser, pytest.mark.torch]

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
]


#: What a transformers model's break reasons hold: a long token with no space to break at.
LONG_TOKEN = "transformers.models.bert.modeling_bert." + "BertSelfAttention.forward." * 12


def start_chromium(profile_dir: str):
    """A headless Chromium with a fresh profile; raise (fail) when it is not installed (skip when
    the selenium package, a dev extra, is not)."""
    pytest.importorskip("selenium", reason="selenium (a dev extra) is not installed: the browser test needs it")
    for exe in (CHROMIUM, CHROMEDRIVER):
        if not (os.path.exists(exe) and os.access(exe, os.X_OK)):
            raise AssertionError(f"{exe} is missing: run `make browser` (apt-get install chromium chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for flag in FLAGS:
        opts.add_argument(flag)
    opts.add_argument(f"--user-data-dir={profile_dir}")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)


@pytest.fixture(scope="module")
def live_receipt():
    """A real run of the bundled example under live capture (backend eager), once for both tests
    (each plants its markup in a copy); not made where the tests would skip for want of selenium."""
    pytest.importorskip("selenium", reason="selenium (a dev extra) is not installed: the browser test needs it")
    import torch

    from seamscope.capture.session import session
    from seamscope.examples import decoder

    torch._dynamo.reset()
    try:
        with session() as s:
            decoder.main(backend="eager")
        yield s.receipt()
    finally:
        torch._dynamo.reset()


def test_report_of_a_real_run_renders_and_stays_inert(live_receipt, tmp_path):
    # GIVEN a real run, with markup planted in a break reason, a file name and a failed guard
    led = live_receipt.ledger
    assert led.break_sites, "the bundled example breaks; capture found no break site"
    sites = list(led.break_sites)
    sites[0] = msgspec.structs.replace(sites[0], reason=XSS_SCRIPT + " " + sites[0].reason + " " + LONG_TOKEN)
    sites[-1] = msgspec.structs.replace(sites[-1], file="evil" + XSS_IMG + ".py")
    comps = [msgspec.structs.replace(c, failed_guards=[XSS_IMG, *c.failed_guards]) if c.is_recompile else c
             for c in led.compilations]
    receipt = make_receipt(msgspec.structs.replace(led, break_sites=sites, compilations=comps))
    path = write_html_report(receipt, tmp_path / "report", source_root=os.getcwd())

    driver = start_chromium(str(tmp_path / "profile"))
    try:
        from selenium.webdriver.common.by import By

        driver.get("file://" + os.path.abspath(path))
        # THEN every section renders
        for sid in ("overview", "top-findings", "timeline", "calls-chart", "variants", "recompiles",
                    "break-sites", "section-probe", "section-shapes", "environment"):
            el = driver.find_element(By.ID, sid)
            assert el.is_displayed() and el.find_element(By.TAG_NAME, "h2").text
        assert "Not in this receipt." in driver.find_element(By.ID, "section-shapes").text
        # the headline leads the overview, and the first finding shown is the costliest in the receipt
        sec = receipt.findings
        assert sec is not None and sec.headline is not None and sec.ranked
        overview = driver.find_element(By.ID, "overview")
        assert overview.find_element(By.CSS_SELECTOR, "#headline .headline-sentence").text == sec.headline.sentence
        shown = driver.find_elements(By.CSS_SELECTOR, "#ranked > li.finding")
        assert shown and shown[0].is_displayed()
        costs = [it.cost_ns or 0 for it in sec.ranked] + [c.cost_ns for c in sec.causes] + [
            f.cost_ns or 0 for f in sec.findings]
        assert shown[0].get_attribute("data-id") == sec.ranked[0].item_id
        assert int(shown[0].get_attribute("data-cost-ns")) == max(costs)
        top = driver.find_element(By.ID, "top-findings")
        assert top.location["y"] <= shown[0].location["y"]
        # the timeline of the call with the most regions has exactly that many region bars
        chosen = max(led.calls, key=lambda c: (sum(isinstance(e, RegionEvent) for e in c.events), -c.index))
        want = sum(isinstance(e, RegionEvent) for e in chosen.events)
        assert want >= 2
        bars = driver.find_elements(By.CSS_SELECTOR, f'svg.tl[data-call="{chosen.index}"] rect.region')
        assert len(bars) == want
        assert all(b.size["width"] > 0 for b in bars)
        # the planted markup is shown as text and never ran
        assert driver.execute_script("return window.__seamscope_pwned === undefined")
        assert driver.find_elements(By.CSS_SELECTOR, "img") == []
        assert driver.find_elements(By.CSS_SELECTOR, "script") == []
        sites_text = driver.find_element(By.ID, "break-sites").text
        assert "<script>window.__seamscope_pwned = 1</script>" in sites_text
        assert "evil" + XSS_IMG + ".py" in sites_text
        if receipt.summary.recompiles:
            assert XSS_IMG in driver.find_element(By.ID, "recompiles").text
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert errors == []
        # the page fits a laptop's 1,400 px window: no horizontal scroll, the findings' raw fields
        # collapsed, a long unbroken token in a break reason wrapped
        assert driver.execute_script("return window.innerWidth") <= 1400
        assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")
        raw = driver.find_element(By.CSS_SELECTOR, "#section-findings details.raw")
        assert raw.get_attribute("open") is None and not raw.find_element(By.TAG_NAME, "table").is_displayed()
        height = driver.execute_script("return document.body.scrollHeight")
        driver.set_window_size(1400, min(int(height) + 120, 4000))
        shot = tmp_path / "report.png"
        assert driver.save_screenshot(str(shot))
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        driver.quit()


def test_notebook_view_of_a_real_run_renders_and_stays_inert(live_receipt, tmp_path):
    # GIVEN the fragment a notebook shows below a cell, with markup planted in a break reason
    led = live_receipt.ledger
    sites = list(led.break_sites)
    sites[0] = msgspec.structs.replace(sites[0], reason=XSS_SCRIPT + " " + sites[0].reason)
    receipt = make_receipt(msgspec.structs.replace(led, break_sites=sites))
    page = tmp_path / "cell.html"
    page.write_text(
        '<!DOCTYPE html><html><head><meta charset="utf-8"><meta http-equiv="Content-Security-Policy" '
        "content=\"default-src 'none'; style-src 'unsafe-inline'\"></head><body>"
        + notebook_html(receipt) + "</body></html>"
    )
    driver = start_chromium(str(tmp_path / "profile"))
    try:
        from selenium.webdriver.common.by import By

        driver.get("file://" + str(page))
        # THEN the overview (counts and the phase table) and the top findings render; a notebook
        # output's element ids carry its own prefix, so two outputs in one page never share an id
        for sid in ("overview", "top-findings"):
            el = driver.find_element(By.CSS_SELECTOR, f'[id^="seamscope-"][id$="-{sid}"]')
            assert el.is_displayed() and el.find_element(By.TAG_NAME, "h2").text
        rows = driver.find_elements(By.CSS_SELECTOR, '[id$="-phase-table"] tbody tr')
        assert [r.find_element(By.TAG_NAME, "td").text for r in rows] == [
            p.phase for p in receipt.summary.phases if p.calls
        ]
        cards = {c.find_element(By.CLASS_NAME, "lbl").text: c.find_element(By.CLASS_NAME, "num").text
                 for c in driver.find_elements(By.CSS_SELECTOR, ".card")}
        assert cards["calls"] == str(receipt.summary.call_count)
        assert driver.find_elements(By.CSS_SELECTOR, '[id$="-top-findings"] li.finding')
        # the styles stay inside the fragment: the page's own body keeps its default font
        assert driver.execute_script("return getComputedStyle(document.body).fontFamily") != \
            driver.execute_script("return getComputedStyle(document.querySelector('.seamscope-nb')).fontFamily")
        assert driver.execute_script("return window.__seamscope_pwned === undefined")
        assert driver.find_elements(By.CSS_SELECTOR, "script") == []
        errors = [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "ERROR")]
        assert errors == []
    finally:
        driver.quit()


def save_demo_screenshot(png: str = "docs/img/report.png", height: int = 1800) -> None:
    """Regenerate the README's screenshot: ``.venv/bin/python tests/test_report_browser.py``
    (from the repo root) runs the bundled example under capture and shoots its report."""
    import tempfile

    import torch

    from seamscope.capture.session import session
    from seamscope.examples import decoder

    torch._dynamo.reset()
    with session(command=["src/seamscope/examples/decoder.py"]) as s:
        decoder.main(backend="eager")
    with tempfile.TemporaryDirectory() as tmp:
        path = write_html_report(s.receipt(), tmp, source_root=os.getcwd())
        driver = start_chromium(os.path.join(tmp, "profile"))
        try:
            driver.get("file://" + os.path.abspath(path))
            driver.set_window_size(1400, height)
            os.makedirs(os.path.dirname(png), exist_ok=True)
            driver.save_screenshot(png)
        finally:
            driver.quit()


if __name__ == "__main__":
    save_demo_screenshot()
