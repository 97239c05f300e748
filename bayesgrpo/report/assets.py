"""The page's inline style sheet and script (no framework, no download: the report opens offline).

The script sorts the runs table by any column (numbers by the cell's ``data-v``, empty values last),
filters the table and the overview together (text and status), opens a run's details when its
anchor is in the address (``#run-N``), keeps the filter and sort across the live page's refreshes
(``sessionStorage``) and downloads the table as CSV from the embedded JSON.
"""

from __future__ import annotations

__all__ = ["CSS", "JS"]

CSS = """
:root{--fg:#1d1d1f;--muted:#5b5b60;--line:#dcdce0;--bg:#fff;--soft:#f5f6f8;--band:#1f6fb4;
--watch:#8a6d00;--warning:#b34700;--critical:#b00000;--ok:#1e7a36}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
header,main>section{padding:0 16px;max-width:1400px;margin:0 auto}
header{padding-top:12px;border-bottom:1px solid var(--line)}
h1{font-size:1.35rem;margin:.2rem 0}h2{font-size:1.1rem;margin:1.4rem 0 .5rem}h3{font-size:1rem;margin:1rem 0 .4rem}
.sub{color:var(--muted);margin:.2rem 0 .5rem}
nav{display:flex;flex-wrap:wrap;gap:2px 14px;padding-bottom:6px}nav a{white-space:nowrap}
a{color:#0b57a4}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(230px,1fr));gap:10px}
.stat{border:1px solid var(--line);border-radius:8px;padding:8px 10px;background:var(--soft)}
.stat b{font-size:1.25rem;display:block}
.stat ol,.stat ul{margin:.3rem 0 0;padding-left:1.2rem}.stat li{overflow-wrap:anywhere}
.controls{display:flex;flex-wrap:wrap;gap:8px;align-items:center;margin:.4rem 0}
.controls input,.controls select,.controls button{font:inherit;padding:4px 8px;border:1px solid var(--line);
border-radius:6px;background:#fff}
.controls input{min-width:14rem;flex:1 1 14rem;max-width:28rem}
.tablewrap{overflow-x:auto;border:1px solid var(--line);border-radius:8px}
table{border-collapse:collapse;width:100%}
th,td{padding:5px 8px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
thead th{position:sticky;top:0;background:var(--soft);z-index:1;white-space:nowrap}
th button{font:inherit;font-weight:600;border:0;background:none;padding:0;cursor:pointer;color:inherit}
th[aria-sort=ascending] button::after{content:" \\25B2"}th[aria-sort=descending] button::after{content:" \\25BC"}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.id{min-width:12rem;max-width:22rem;overflow-wrap:anywhere}
#runs td:first-child,#runs th:first-child{position:sticky;left:0;background:#fff}
#runs th:first-child{background:var(--soft);z-index:2}
tr.error td{background:#fff4f4}
.sev{display:inline-block;border-radius:4px;padding:0 5px;margin:1px 2px 1px 0;font-size:.85em}
.sev-watch{background:#fff3c4;color:var(--watch)}.sev-warning{background:#ffe2cc;color:var(--warning)}
.sev-critical{background:#ffd6d6;color:var(--critical);font-weight:600}.sev-none{color:var(--muted)}
.ok{color:var(--ok)}.poor{color:var(--critical);font-weight:600}.muted{color:var(--muted)}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(180px,1fr));gap:8px}
.card{border:1px solid var(--line);border-radius:6px;padding:4px;text-decoration:none;color:inherit;display:block;
min-width:0}
.card.w-watch{border-color:#e6c84d}.card.w-warning{border-color:#f0a060}
.card.w-critical{border-color:#d04040;border-width:2px}
.card.error{background:#fff4f4}
.card img{width:100%;height:auto;display:block}
.card .cap{font-size:.78rem;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.card .val{font-size:.78rem;color:var(--muted)}
details.run{border:1px solid var(--line);border-radius:8px;margin:6px 0;padding:0 10px}
details.run>summary{cursor:pointer;padding:6px 0;overflow-wrap:anywhere}
details.run[open]>summary{border-bottom:1px solid var(--line);margin-bottom:8px}
.figs{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(100%,520px),1fr));gap:12px}
figure{margin:0}figure img{max-width:100%;height:auto;border:1px solid var(--line);border-radius:4px}
figcaption{font-size:.85rem;color:var(--muted)}
.key{display:inline-block;width:14px;height:8px;margin:0 3px 0 8px;vertical-align:middle}
dl.prov{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px}dl.prov dt{font-weight:600}
dl.prov dd{margin:0;overflow-wrap:anywhere}
code{font-size:.9em;overflow-wrap:anywhere}
.note{font-size:.88rem;color:var(--muted);max-width:75rem}
@media (max-width:600px){body{font-size:13px}header,main>section{padding:0 8px}
.grid{grid-template-columns:repeat(2,minmax(0,1fr))}
td.id{min-width:9rem;max-width:11rem}dl.prov{grid-template-columns:1fr}}
"""

JS = """
(function () {
  "use strict";
  var table = document.getElementById("runs");
  if (!table) { return; }
  var tbody = table.tBodies[0];
  var rows = Array.prototype.slice.call(tbody.rows);
  var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
  var cards = Array.prototype.slice.call(document.querySelectorAll(".card"));
  var q = document.getElementById("filter");
  var st = document.getElementById("status-filter");
  var count = document.getElementById("count");
  var store = window.sessionStorage;
  var sortCol = -1, sortDir = 1;

  function key(row, col) {
    var c = row.cells[col];
    if (c.getAttribute("data-t") === "num") {
      var x = parseFloat(c.getAttribute("data-v"));
      return isNaN(x) ? null : x;
    }
    var v = c.getAttribute("data-v");
    return (v === null ? c.textContent : v).toLowerCase();
  }
  function sortBy(col, dir) {
    sortDir = dir || (col === sortCol ? -sortDir : 1);
    sortCol = col;
    var sorted = rows.slice().sort(function (a, b) {
      var x = key(a, col), y = key(b, col);
      if (x === null && y === null) { return 0; }
      if (x === null) { return 1; }
      if (y === null) { return -1; }
      return (x < y ? -1 : x > y ? 1 : 0) * sortDir;
    });
    sorted.forEach(function (r) { tbody.appendChild(r); });
    heads.forEach(function (h, i) {
      h.setAttribute("aria-sort", i === col ? (sortDir > 0 ? "ascending" : "descending") : "none");
    });
    save();
  }
  function match(d, needle) {
    if (needle && d.search.indexOf(needle) < 0) { return false; }
    switch (st.value) {
      case "ok": return d.status === "ok";
      case "error": return d.status === "error";
      case "flagged": return Number(d.sev) >= 2;
      case "stop": return d.stop === "1";
      default: return true;
    }
  }
  function applyFilter() {
    var needle = q.value.trim().toLowerCase(), n = 0;
    rows.forEach(function (r) { var ok = match(r.dataset, needle); r.hidden = !ok; if (ok) { n += 1; } });
    cards.forEach(function (c) { c.hidden = !match(c.dataset, needle); });
    count.textContent = n + " of " + rows.length + " runs shown";
    save();
  }
  function save() {
    try { store.setItem("bayesgrpo-report", JSON.stringify({q: q.value, st: st.value, col: sortCol, dir: sortDir})); }
    catch (e) { /* storage may be disabled: the page works without it */ }
  }
  function restore() {
    var s = null;
    try { s = JSON.parse(store.getItem("bayesgrpo-report") || "null"); } catch (e) { s = null; }
    if (!s) { return; }
    q.value = s.q || ""; st.value = s.st || "all";
    if (s.col >= 0 && s.col < heads.length) { sortBy(s.col, s.dir); }
  }
  function openHash() {
    var id = decodeURIComponent(window.location.hash.slice(1));
    var el = id ? document.getElementById(id) : null;
    if (el && el.tagName === "DETAILS") { el.open = true; el.scrollIntoView(); }
  }
  function csvCell(v) {
    if (v === null || v === undefined) { return ""; }
    var s = String(v);
    return /[",\\n\\r]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  }
  function downloadCsv() {
    var data = JSON.parse(document.getElementById("report-data").textContent);
    var lines = [data.columns.map(csvCell).join(",")];
    data.rows.forEach(function (r) { lines.push(r.map(csvCell).join(",")); });
    var url = URL.createObjectURL(new Blob([lines.join("\\n") + "\\n"], {type: "text/csv"}));
    var a = document.createElement("a");
    a.href = url; a.download = "bayesgrpo-report.csv";
    document.body.appendChild(a); a.click(); a.remove();
    setTimeout(function () { URL.revokeObjectURL(url); }, 1000);
  }
  heads.forEach(function (h, i) {
    var b = h.querySelector("button");
    if (b) { b.addEventListener("click", function () { sortBy(i); }); }
  });
  q.addEventListener("input", applyFilter);
  st.addEventListener("change", applyFilter);
  document.getElementById("csv").addEventListener("click", downloadCsv);
  window.addEventListener("hashchange", openHash);
  restore();
  applyFilter();
  openHash();
})();
"""
