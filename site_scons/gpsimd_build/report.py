"""The HTML test report: one static page (``<BUILD_DIR>/<profile>/report.html``)
with every library's vectors, written after every test run.

The page needs no server, no network and no other file: the style is in
the page and there is no script. It holds, per library, its state (results
of this run, stale, not run) and per op and vector the status, the error
figures (``max_abs_err``, mismatches), the failure message and the
warnings. For a vector of a multicore library it draws the output as a
strip of elements coloured by the core that wrote them, from the
``layout`` of the results (``gpsimd_device.results``: element ranges,
never per element, so a vector of millions of elements costs what its
ranges cost): holes, overlaps, writes past the end (in a zone after the
end marker) and each faulting core's range, each also listed in words.
Without checks (``EMU_CHECKS=0``) the results hold no write sets, and the
page says so instead of drawing.

The page is a pure function of its input (no time, no path of the
machine): the same results give the same bytes. Stdlib only (the build's
own steps run it under ``python -S``). Reading it from the results files,
with a cache of sections: ``gpsimd_build.report_files``.
"""

import html
import re
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Sequence

from gpsimd_device.printable import visible
from gpsimd_device.results import LibraryResults, VectorResult, counts_text

__all__ = ["CORE_COLOURS", "MARK_COLOURS", "STRIP_WIDTH", "COUNTED_STATES", "ReportLibrary",
           "render_report", "library_section", "page"]

#: Fill colour of core ``k``'s elements (``CORE_COLOURS[k % 8]``): eight
#: hues apart from the marks' red and black.
CORE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd",
                "#8c564b", "#e377c2", "#17becf", "#bcbd22")
#: Fill colours of the marks: elements no core wrote, elements two cores
#: wrote, the zone past the output's end, a faulting core's range.
MARK_COLOURS = {"hole": "#d62728", "overlap": "#000000", "beyond": "#c8c8c8",
                "fault": "#ffd400"}
#: Width of a strip in CSS pixels (every strip has it, so that strips
#: compare by eye).
STRIP_WIDTH = 800
#: The marks that also carry a pattern (stripes in the top and bottom
#: thirds of the mark, its middle the plain colour), so that the picture
#: reads without colour vision: a stripe angle and colour each.
PATTERNED = ("hole", "beyond", "past-end", "fault")
_HATCH = "repeating-linear-gradient({}deg, {} 0 1px, transparent 1px 4px)"

#: The states whose results are shown and counted.
COUNTED_STATES = ("current", "kept", "cached")
_STATES = {
    "current": "results of this run",
    "kept": "not run in this build: its results are still current for its sources",
    "cached": "cached: results served from the build cache",
    "stale": "stale: results of an earlier build (this build did not run its tests)",
    "not run": "not run",
    "no results": "the test run failed without results",
}

_STYLE = f"""
body {{ font: 14px/1.4 sans-serif; margin: 16px; color: #222; background: #fff; }}
h1 {{ font-size: 20px; margin: 0 0 8px; }}
h2 {{ font-size: 16px; margin: 24px 0 4px; }}
.totals {{ font-weight: bold; }}
.state {{ font-weight: normal; color: #666; font-size: 13px; }}
table {{ border-collapse: collapse; margin: 4px 0; }}
th, td {{ border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; }}
td.num {{ text-align: right; font-family: monospace; }}
tr.pass td.status {{ background: #d9f2d9; }}
tr.fail td.status {{ background: #f8d0d0; }}
tr.checked td.status {{ background: #dde8f8; }}
.message {{ white-space: pre-wrap; font-family: monospace; font-size: 12px; }}
.warning {{ color: #8a5a00; font-family: monospace; font-size: 12px; }}
.output pre {{ max-height: 20em; overflow: auto; font-size: 12px; }}
.strip {{ position: relative; width: {STRIP_WIDTH}px; height: 20px; background: #fff;
          border: 1px solid #888; margin: 4px 0 0; overflow: hidden; }}
.faults {{ position: relative; width: {STRIP_WIDTH}px; height: 10px; margin: 2px 0 4px;
           border: 1px solid transparent; overflow: hidden; }}
.seg {{ position: absolute; top: 0; bottom: 0; min-width: 1px; }}
.seg.overlap {{ background: {MARK_COLOURS["overlap"]}; }}
.seg.hole {{ background: {MARK_COLOURS["hole"]}; }}
.seg.beyond {{ background: {MARK_COLOURS["beyond"]}; }}
.seg.fault {{ background: {MARK_COLOURS["fault"]}; }}
 """ + "".join(
    f".seg.pat-{k}, .swatch.pat-{k} {{ background-image: {_HATCH.format(angle, ink)}, "
    f"{_HATCH.format(angle, ink)}; background-repeat: repeat-x; background-position: top, "
    f"bottom; background-size: 100% 30%, 100% 30%; }}\n"
    for k, angle, ink in (("hole", 45, "#fff"), ("beyond", 0, "#666"),
                          ("past-end", 135, "#000"), ("fault", 90, "#000"))) + f""".axis {{ position: relative; width: {STRIP_WIDTH}px; height: 14px; font-size: 10px;
         font-family: monospace; color: #444; }}
.tick {{ position: absolute; top: 0; white-space: nowrap; border-left: 1px solid #888;
         padding-left: 2px; }}
.tick.last {{ border-left: none; border-right: 1px solid #888; padding: 0 2px 0 0;
              transform: translateX(-100%); }}
.failures {{ border: 1px solid #e0a0a0; background: #fff4f4; padding: 4px 12px; }}
.end {{ position: absolute; top: 0; bottom: 0; width: 2px; background: #000; }}
.legend span.swatch {{ display: inline-block; width: 12px; height: 12px;
                       vertical-align: middle; margin: 0 3px 0 10px; border: 1px solid #888; }}
ul.ranges {{ margin: 2px 0; padding-left: 18px; font-family: monospace; font-size: 12px; }}
.nolayout {{ color: #666; font-style: italic; }}
""" + "".join(f".seg.core{k} {{ background: {c}; }}\n" for k, c in enumerate(CORE_COLOURS))


@dataclass
class ReportLibrary:
    """One library of the report.

    Attributes:
        name: the library name.
        state: ``"current"``, ``"kept"``, ``"cached"`` (results shown and
            counted), ``"stale"``, ``"not run"`` or ``"no results"``.
        results: its results (``None`` when there are none to show).
        multicore: the library runs on eight cores (its vectors get strips).
        checks: whether the run had the emulator's checks; only used when a
            multicore vector has no layout, to say why.
    """

    name: str
    state: str
    results: Optional[LibraryResults] = None
    multicore: bool = False
    checks: Optional[bool] = None
    #: the library's last explore record (``explore.json``), or None; its
    #: ``"stale"``: why its results are not this build's, or ""
    #: (``gpsimd_build.report_files``)
    explored: Optional[Dict[str, Any]] = None


def _e(text: Any) -> str:
    """``text`` for the page: escaped, and (as it may be a kernel's: a
    message, what a core wrote) its control characters made visible, as the
    terminal shows them."""
    return html.escape(visible(str(text)), quote=True)


def _ranges_text(ranges: Iterable[Sequence[int]]) -> str:
    return ", ".join(f"[{a}, {b})" for a, b in ranges)


def _seg(kind: str, a: int, b: int, domain: int, title: str, core: Optional[int] = None,
         fill: bool = True) -> str:
    """One absolutely placed segment for elements ``[a, b)`` of ``domain``,
    in ``core``'s colour when ``fill`` (else in the colour of ``kind``)."""
    left = 100.0 * a / domain
    width = 100.0 * (b - a) / domain
    cls = f"seg {kind}" + (f" core{core % len(CORE_COLOURS)}" if core is not None and fill else "")
    cls += f" pat-{kind}" if kind in PATTERNED else ""
    data = f' data-core="{core}"' if core is not None else ""
    return (f'<div class="{cls}" data-kind="{kind}"{data} data-range="{a},{b}" '
            f'style="left:{left:.4f}%;width:{width:.4f}%" title="{_e(title)}"></div>')


def _strip(layout: Dict[str, Any], failed: bool) -> str:
    """The strip, its fault row, legend and the ranges in words (folded
    unless the vector ``failed``)."""
    n = int(layout.get("elements") or 0)
    cores = [c for c in layout.get("cores") or [] if isinstance(c, dict)]
    faults = [(int(c.get("core", k)), c["fault"]) for k, c in enumerate(cores)
              if isinstance(c.get("fault"), dict)]
    ends = [n] + [int(b) for c in cores for _, b in c.get("past_end") or []]
    ends += [int(f["range"][1]) for _, f in faults if f.get("range")]
    domain = max(max(ends), 1)
    segs: List[str] = []
    if domain > n:
        segs.append(_seg("beyond", n, domain, domain, f"past the end: elements [{n}, {domain})"))
    for k, c in enumerate(cores):
        core = int(c.get("core", k))
        for a, b in c.get("written") or []:
            segs.append(_seg("written", a, b, domain, f"core {core} wrote [{a}, {b})", core))
    for a, b in layout.get("holes") or []:
        segs.append(_seg("hole", a, b, domain, f"hole: no core wrote [{a}, {b})"))
    for o in layout.get("overlaps") or []:
        a, b = o["range"]
        who = ", ".join(str(c) for c in o.get("cores") or [])
        segs.append(_seg("overlap", a, b, domain, f"overlap: cores {who} wrote [{a}, {b})"))
    if domain > n:   # (under the writes past the end)
        segs.append(f'<div class="end" data-kind="end" style="left:{100.0 * n / domain:.4f}%" '
                    f'title="end of the output ({n} elements)"></div>')
    for k, c in enumerate(cores):
        core = int(c.get("core", k))
        for a, b in c.get("past_end") or []:
            segs.append(_seg("past-end", a, b, domain,
                             f"core {core} wrote past the end: [{a}, {b})", core))
    fault_segs = []
    for core, f in faults:
        if f.get("range"):
            a, b = f["range"]
            fault_segs.append(_seg("fault", a, b, domain,
                                   f"core {core} fault {f.get('kind')}: [{a}, {b})", core,
                                   fill=False))
    present = sorted({int(c.get("core", k)) for k, c in enumerate(cores)
                      if c.get("written") or c.get("past_end")})
    legend = "".join(f'<span class="swatch seg-legend core{k % 8}" '
                     f'style="background:{CORE_COLOURS[k % 8]}"></span>core {k}' for k in present)
    shown = {"hole": bool(layout.get("holes")), "overlap": bool(layout.get("overlaps")),
             "beyond": domain > n, "fault": bool(fault_segs)}
    legend += "".join(f'<span class="swatch{" pat-" + m if m in PATTERNED else ""}" '
                      f'style="background-color:{MARK_COLOURS[m]}"></span>{label}'
                      for m, label in (("hole", "hole"), ("overlap", "overlap"),
                                       ("beyond", "past the end"), ("fault", "fault range"))
                      if shown[m])
    if any(c.get("past_end") for c in cores):
        legend += ('<span class="swatch pat-past-end" style="background-color:#fff"></span>'
                   "written past the end")
    words = []
    for k, c in enumerate(cores):
        core = int(c.get("core", k))
        parts = []
        for key, label in (("written", "wrote"), ("past_end", "wrote past the end"),
                           ("read_before_write", "read before writing"),
                           ("uninit", "wrote values from unwritten memory")):
            if c.get(key):
                parts.append(f"{label} {_ranges_text(c[key])}")
        f = c.get("fault")
        if isinstance(f, dict):
            where = f" at {_ranges_text([f['range']])}" if f.get("range") else ""
            parts.append(f"fault {f.get('kind')}{where}")
        words.append(f"core {core}: " + ("; ".join(parts) if parts else "wrote nothing"))
    if layout.get("holes"):
        words.append(f"holes: {_ranges_text(layout['holes'])}")
    for o in layout.get("overlaps") or []:
        words.append(f"overlap: {_ranges_text([o['range']])} by cores "
                     f"{', '.join(str(c) for c in o.get('cores') or [])}")
    if layout.get("order_dependent"):
        words.append(f"order dependent: {_ranges_text(layout['order_dependent'])}")
    if layout.get("truncated"):
        words.append("(some lists were cut at 256 ranges)")
    return (f'<div class="layout" data-elements="{n}" data-domain="{domain}">'
            f'<div class="strip">{"".join(segs)}</div>'
            f'<div class="faults">{"".join(fault_segs)}</div>'
            f'{_axis(n, domain)}<div class="legend">{legend}</div>'
            f'<details{" open" if failed else ""}><summary>ranges</summary>'
            f'<ul class="ranges">{"".join(f"<li>{_e(w)}</li>" for w in words)}</ul>'
            f"</details></div>")


def _axis(n: int, domain: int) -> str:
    """The element-offset axis under a strip of ``domain`` elements whose
    output has ``n``: ticks at 0, ``n``, the domain's end when writes or a
    fault reach past ``n``, and each quarter of ``n``, in that order of
    precedence, leaving out a tick closer than 6% of the strip to one
    already placed (so that no two labels overlap)."""
    placed: List[int] = []
    for t in (0, n, domain, n // 2, n // 4, 3 * n // 4):
        if all(abs(t - p) > 0.06 * domain for p in placed):
            placed.append(t)
    out = []
    for t in sorted(placed):
        last = t == max(placed) and t > 0.9 * domain     # (its label left of the tick)
        out.append(f'<span class="tick{" last" if last else ""}" data-offset="{t}" '
                   f'style="left:{100.0 * t / domain:.4f}%">{t}</span>')
    return f'<div class="axis" title="element offsets">{"".join(out)}</div>'


def _number(value: Any) -> str:
    if value is None:
        return "&ndash;"
    if isinstance(value, float):
        return _e(f"{value:.3g}")
    return _e(value)


def _anchor(*names: str) -> str:
    """The element id of a library's section (``lib-<lib>``) or of a
    vector's row (``v-<lib>--<op>--<vector>``: library and op names are
    identifiers, so the separators are unambiguous), escaped."""
    return _e(("lib-" if len(names) == 1 else "v-") + "--".join(names))


#: A vector row's opening tag; the list of failures at the top of the page
#: is read back from it (:data:`_FAILED_ROW`, made from this text).
_ROW_OPEN = '<tr class="vector {status}" data-vector="{name}" id="{anchor}">'
_FAILED_ROW = re.compile(re.escape(_ROW_OPEN.format(status="fail", name="NAME", anchor="ANCHOR"))
                         .replace("NAME", '([^"]+)').replace("ANCHOR", '([^"]+)'))


def _vector_rows(lib: ReportLibrary, r: VectorResult) -> str:
    name = f"{lib.name}::{r.op}[{r.vector}]"
    detail = f'<div class="message">{_e(r.message)}</div>' if r.message else ""
    detail += "".join(f'<div class="warning">warning: {_e(w)}</div>' for w in r.warnings)
    detail += "".join(
        f'<details class="output"><summary>core {_e(o.get("core"))} {_e(o.get("stream"))}: '
        f'{_e(o.get("bytes"))} bytes</summary><pre>{_e(o.get("text"))}</pre></details>'
        for o in r.output)
    row = (_ROW_OPEN.format(status=_e(r.status), name=_e(name),
                            anchor=_anchor(lib.name, r.op, r.vector)) +
           f"<td>{_e(r.op)}</td><td>{_e(r.vector)}</td><td>{_e(r.where)}</td>"
           f'<td class="status">{_e(r.status.upper())}</td>'
           f'<td class="num">{_number(r.max_abs_err)}</td>'
           f'<td class="num">{_number(r.mismatches)}</td><td>{detail}</td></tr>')
    if not lib.multicore:
        return row
    if isinstance(r.layout, dict):
        picture = _strip(r.layout, not r.passed)
    else:
        why = ("the run had no checks (EMU_CHECKS=0)" if lib.checks is False
               else "the run wrote none (no checks, or the run could not be judged)")
        picture = f'<p class="nolayout">No write-set data: {why}.</p>'
    return row + (f'<tr class="picture" data-vector="{_e(name)}"><td colspan="7">'
                  f"{picture}</td></tr>")


def library_section(lib: ReportLibrary) -> str:
    """One library's section of the page (HTML text)."""
    state = _STATES.get(lib.state, lib.state)
    head = (f'<section class="library" id="{_anchor(lib.name)}" '
            f'data-library="{_e(lib.name)}" data-state="{_e(lib.state)}">')
    res = lib.results
    counts = f"{res.counts()}; " if res is not None else ""
    out = [head, f'<h2>{_e(lib.name)} <span class="state">({_e(counts)}{_e(state)})</span></h2>']
    if res is not None and res.vectors:
        out.append("<table><tr><th>op</th><th>vector</th><th>where</th><th>status</th>"
                   "<th>max_abs_err</th><th>mismatches</th><th>message, warnings</th></tr>")
        out += [_vector_rows(lib, r) for r in res.vectors]
        out.append("</table>")
    if res is not None and res.no_vectors:
        out.append(f'<p class="no-vectors">without vectors (nothing run; <code>'
                   f'explore-{_e(lib.name)}</code> searches them for a failing input): '
                   f'{_e(", ".join(res.no_vectors))}</p>')
    out.append(_explored(lib))
    out.append("</section>")
    return "\n".join(out)


def _explored(lib: ReportLibrary) -> str:
    """The library's last explore (``gpsimd_explore``'s record): a row
    per op, and a falsified op's smallest example as a vector row (with
    its picture) and as the YAML to paste; "" when there is none."""
    ops = lib.explored.get("ops") if isinstance(lib.explored, dict) else None
    if not isinstance(ops, dict) or not ops:
        return ""
    stale = lib.explored.get("stale")
    when = f"stale: {stale}; run it again" if stale else "its results are as of that run"
    out = [f'<div class="explore"><h3>explore: the last run of <code>explore-{_e(lib.name)}'
           f"</code> ({_e(when)})</h3><table>"
           "<tr><th>op</th><th>status</th><th>what it found</th></tr>"]
    falsified = []
    for op, rec in ops.items():
        rec = rec if isinstance(rec, dict) else {}
        status = str(rec.get("status", "?"))
        line, _, example = str(rec.get("text", "")).partition("\n")
        pasted = f"<pre>{_e(example)}</pre>" if example.strip() else ""
        out.append(f'<tr class="explore {_e(status.lower())}" data-op="{_e(op)}"><td>{_e(op)}'
                   f'</td><td class="status">{_e(status)}</td><td>{_e(line)}{pasted}</td></tr>')
        if isinstance(rec.get("result"), dict):
            falsified.append(VectorResult.from_json(rec["result"]))
    out.append("</table>")
    if falsified:       # (rows of their own class: not in the list of failed vectors)
        out.append("<table><tr><th>op</th><th>example</th><th>where</th><th>status</th>"
                   "<th>max_abs_err</th><th>mismatches</th><th>message, warnings</th></tr>")
        out += [_vector_rows(lib, r).replace('<tr class="vector ', '<tr class="example ', 1)
                for r in falsified]
        out.append("</table>")
    return "\n".join(out) + "</div>"


def render_report(libraries: Sequence[ReportLibrary], title: str = "GPSIMD test report",
                  totals: str = "") -> str:
    """The page (UTF-8 text) for ``libraries`` in the order given.

    Args:
        libraries: the libraries (``ReportLibrary``); those not ``current``
            are shown with their state, and their results only if given.
        title: the page's title and heading.
        totals: the totals line (e.g. ``"all libraries: 12 passed, 1
            failed"``); empty: counted from the current libraries.

    Returns:
        The HTML text; the same input gives the same text.
    """
    if not totals:
        cur = [lib.results for lib in libraries if lib.state in COUNTED_STATES and lib.results]
        totals = "total: " + counts_text(sum(r.passed for r in cur), sum(r.failed for r in cur),
                                         sum(r.checked for r in cur),
                                         sum(len(r.no_vectors) for r in cur))
    return page([library_section(lib) for lib in libraries], title, totals)


def _failures(sections: Sequence[str]) -> str:
    """The list of failed vectors at the top of the page, each a link to
    its row (read from the sections' rows, so that cached sections need
    no results file)."""
    failed = [m.groups() for text in sections for m in _FAILED_ROW.finditer(text)]
    if not failed:
        return ""
    items = "".join(f'<li><a href="#{anchor}">{name}</a></li>' for name, anchor in failed)
    return (f'<section class="failures"><h2>{len(failed)} failed vector'
            f'{"" if len(failed) == 1 else "s"}</h2><ul>{items}</ul></section>\n')


def page(sections: Sequence[str], title: str, totals: str) -> str:
    """The whole page around the libraries' ``sections`` (HTML text)."""
    body = "\n".join(sections)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{_e(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
            f"<h1>{_e(title)}</h1>\n<p class=\"totals\">{_e(totals)}</p>\n"
            f"{_failures(sections)}{body}\n</body>\n</html>\n")

