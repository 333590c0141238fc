"""Render an HTML page in headless Chromium and read back what it drew.

:func:`render` loads the page twice with the same window: once with a probe
script appended to a copy of it (``--dump-dom`` prints the DOM after the
script ran: every strip segment's box, kind, core and range, and the
page's height), once as it is for a screenshot (``--screenshot``), whose
pixels :class:`Picture` reads with Pillow. The page itself has no script;
only the copy has the probe.

Skips (``pytest.skip``) with the reason when Chromium or Pillow is absent.
"""
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from typing import Dict, List, Tuple

import pytest

#: Window width in CSS pixels (device scale 1: one CSS pixel, one pixel).
WIDTH = 1200

_PROBE = """<script>
window.addEventListener("load", () => {
  const out = {height: document.documentElement.scrollHeight, segs: []};
  for (const el of document.querySelectorAll(".strip > div, .faults > div")) {
    const r = el.getBoundingClientRect();
    const row = el.parentElement.className;
    const vec = el.closest("tr.picture").dataset.vector;
    out.segs.push({vector: vec, row: row, kind: el.dataset.kind, core: el.dataset.core || null,
                   range: el.dataset.range || null, x: r.left + window.scrollX,
                   y: r.top + window.scrollY, w: r.width, h: r.height,
                   colour: getComputedStyle(el).backgroundColor});
  }
  const pre = document.createElement("pre");
  pre.id = "gpsimd-probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def chromium() -> str:
    """The Chromium program, or skip."""
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("chromium is not installed (.ci/run installs Debian's chromium; apt may "
                "have been unable to)")


def _run(args: List[str], page: str, timeout: float = 120) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory() as profile:
        cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--force-device-scale-factor=1", "--no-first-run", "--disable-extensions",
               f"--user-data-dir={profile}", *args, "file://" + os.path.abspath(page)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@dataclass
class Picture:
    """The screenshot and the segments the page drew."""

    segs: List[Dict]
    image: object   # PIL.Image.Image, RGB

    def pixel(self, x: float, y: float) -> Tuple[int, int, int]:
        return self.image.getpixel((int(x), int(y)))[:3]

    def expected_at(self, x: float, y: float) -> Tuple[int, int, int]:
        """The colour of the last segment (in DOM order, so on top) whose box
        holds ``(x, y)``."""
        colour = None
        for s in self.segs:
            if s["x"] <= x < s["x"] + s["w"] and s["y"] <= y < s["y"] + s["h"]:
                colour = s["colour"]
        assert colour is not None, (x, y)
        return rgb(colour)


def rgb(css: str) -> Tuple[int, int, int]:
    """``rgb(1, 2, 3)`` or ``#010203`` as a tuple."""
    if css.startswith("#"):
        return tuple(int(css[i:i + 2], 16) for i in (1, 3, 5))
    return tuple(int(v) for v in re.findall(r"\d+", css)[:3])


def render(page: str) -> Picture:
    """Render ``page`` (a file) in Chromium: its strip segments (with
    boxes in page pixels) and a screenshot of the whole page."""
    try:
        from PIL import Image
    except ImportError:
        pytest.skip("Pillow is not installed (the test extra installs it)")
    with tempfile.TemporaryDirectory() as tmp:
        probe = os.path.join(tmp, "probe.html")
        with open(page, encoding="utf-8") as f:
            text = f.read()
        with open(probe, "w", encoding="utf-8") as f:
            f.write(text.replace("</body>", _PROBE + "</body>"))
        dom = _run([f"--window-size={WIDTH},800", "--virtual-time-budget=5000", "--dump-dom"],
                   probe)
        m = re.search(r'<pre id="gpsimd-probe">(.*?)</pre>', dom.stdout, re.S)
        assert m, dom.stdout[-2000:] + dom.stderr[-2000:]
        import html
        data = json.loads(html.unescape(m.group(1)))
        height = min(int(data["height"]) + 10, 16000)
        shot = os.path.join(tmp, "shot.png")
        proc = _run([f"--window-size={WIDTH},{height}", f"--screenshot={shot}"], page)
        assert os.path.exists(shot), proc.stderr[-2000:]
        image = Image.open(shot).convert("RGB")
        image.load()
    return Picture(data["segs"], image)
