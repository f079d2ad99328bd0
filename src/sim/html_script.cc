// html_script.cc — the HTML report's inline script and its style (see html_script.h).
#include "html_script.h"

namespace ratelimit::sim {
namespace {

constexpr std::string_view kScript = R"JS(
(function () {
  'use strict';
  var NS = 'http://www.w3.org/2000/svg';
  function trim(s) { return s.toFixed(6).replace(/0+$/, '').replace(/\.$/, ''); }
  function niceStep(raw) {
    var p = 1e-6;
    while (p * 10 <= raw) p *= 10;
    var ms = [1, 2, 5, 10];
    for (var i = 0; i < ms.length; i++) if (ms[i] * p >= raw) return ms[i] * p;
    return 10 * p;
  }
  function el(name, attrs) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    return e;
  }
  function duration(us) {
    if (us % 1000000 === 0) return (us / 1000000) + 's';
    if (us >= 1000000) return trim(us / 1e6) + 's';
    if (us % 1000 === 0) return (us / 1000) + 'ms';
    return us + 'us';
  }
  function setup(svg, wrap) {
    var data = JSON.parse(svg.querySelector('metadata.chart-data').textContent);
    var L = +svg.getAttribute('data-plot-left'), W = +svg.getAttribute('data-plot-width');
    var top = +svg.getAttribute('data-plot-top'), bottom = +svg.getAttribute('data-plot-bottom');
    var T0 = data.t0_us, T1 = data.t1_us, bar = data.bar_us;
    var origin = data.absolute ? T0 : 0;
    var plots = Array.prototype.slice.call(svg.querySelectorAll('svg.plot'));
    var axis = svg.querySelector('#time-axis'), grid = svg.querySelector('#grid');
    var view = [T0, T1], drag = null;
    var sel = el('rect', {'class': 'zoom-selection', y: top, height: bottom - top, fill: '#2c7fb8',
                          'fill-opacity': 0.15, visibility: 'hidden', 'pointer-events': 'none'});
    var cursor = el('line', {'class': 'hover-cursor', y1: top, y2: bottom, stroke: '#000000',
                             'stroke-opacity': 0.45, visibility: 'hidden', 'pointer-events': 'none'});
    svg.appendChild(sel);
    svg.appendChild(cursor);
    var tip = document.createElement('div');
    tip.className = 'chart-tip';
    tip.style.display = 'none';
    wrap.appendChild(tip);
    var reset = document.createElement('button');
    reset.type = 'button';
    reset.className = 'chart-reset';
    reset.textContent = 'Reset zoom';
    wrap.insertBefore(reset, wrap.firstChild);

    function xOf(t) { return L + W * (t - view[0]) / (view[1] - view[0]); }
    function tOf(x) { return view[0] + (x - L) / W * (view[1] - view[0]); }
    function fullX(t) { return L + W * (t - T0) / (T1 - T0); }
    function label(t) { return (data.absolute ? '+' : '') + trim((t - origin) / 1e6); }
    function point(evt) {
      var p = svg.createSVGPoint();
      p.x = evt.clientX;
      p.y = evt.clientY;
      return p.matrixTransform(svg.getScreenCTM().inverse());
    }
    function inPlot(p) { return p.x >= L && p.x <= L + W && p.y >= top && p.y <= bottom; }

    function setView(a, b) {
      var minSpan = Math.min(T1 - T0, 4 * bar);
      if (b - a < minSpan) { var m = (a + b) / 2; a = m - minSpan / 2; b = m + minSpan / 2; }
      if (a < T0) { b += T0 - a; a = T0; }
      if (b > T1) { a -= b - T1; b = T1; }
      a = Math.max(a, T0);
      view = [a, b];
      var x = fullX(a), w = fullX(b) - x;
      plots.forEach(function (p) {
        var vb = p.viewBox.baseVal;
        p.setAttribute('viewBox', x + ' ' + vb.y + ' ' + w + ' ' + vb.height);
      });
      var step = niceStep((b - a) / 8 / 1e6) * 1e6;
      var ticks = axis.querySelectorAll('text.tick');
      for (var i = 0; i < ticks.length; i++) ticks[i].parentNode.removeChild(ticks[i]);
      while (grid.firstChild) grid.removeChild(grid.firstChild);
      var y = bottom + 20;
      for (var t = Math.ceil((a - origin) / step - 1e-9) * step + origin; t <= b + 1; t += step) {
        var tick = el('text', {'class': 'tick', x: xOf(t), y: y, 'text-anchor': 'middle'});
        tick.textContent = label(t);
        axis.appendChild(tick);
        grid.appendChild(el('line', {x1: fullX(t), x2: fullX(t), y1: top, y2: bottom, stroke: '#dddddd',
                                     'stroke-width': 1, 'vector-effect': 'non-scaling-stroke'}));
      }
      var marks = svg.querySelectorAll('.at-time');
      for (var k = 0; k < marks.length; k++) {
        var mx = xOf(+marks[k].getAttribute('data-t-us'));
        marks[k].setAttribute('x', mx);
        marks[k].setAttribute('visibility', mx < L || mx > L + W ? 'hidden' : 'visible');
      }
      svg.setAttribute('data-view', Math.round(a) + ',' + Math.round(b));
    }

    function hide() { tip.style.display = 'none'; cursor.setAttribute('visibility', 'hidden'); }
    function hoverAt(t) {
      var j = Math.floor((t - T0) / bar);
      if (j < 0 || j >= data.offered.length) { hide(); return null; }
      var start = T0 + j * bar;
      var rows = [label(start) + ' s to ' + label(start + bar) + ' s: offered ' + data.offered[j]];
      data.lanes.forEach(function (lane) {
        var row = lane.algorithm + ': admitted ' + lane.admitted[j] + ', denied ' + lane.denied[j];
        if (lane.algorithm === 'leaky_bucket') row += ', departed ' + lane.departed[j];
        if (lane.key_peak[j] > 0) {
          row += '; busiest key ' + lane.key_peak[j] + ' in ' + duration(lane.peak_window_us) +
                 ' (limit ' + lane.limit + ')';
        }
        rows.push(row);
      });
      while (tip.firstChild) tip.removeChild(tip.firstChild);
      rows.forEach(function (r, i) {
        var d = document.createElement('div');
        if (i === 0) d.className = 'head';
        d.textContent = r;
        tip.appendChild(d);
      });
      var x = xOf(start + bar / 2);
      cursor.setAttribute('x1', x);
      cursor.setAttribute('x2', x);
      cursor.setAttribute('visibility', 'visible');
      var box = svg.getBoundingClientRect(), outer = wrap.getBoundingClientRect();
      var scale = box.width / svg.viewBox.baseVal.width;
      var left = box.left - outer.left + wrap.scrollLeft + x * scale + 14;
      tip.style.display = 'block';
      if (left + tip.offsetWidth > wrap.scrollLeft + wrap.clientWidth) left -= tip.offsetWidth + 28;
      tip.style.left = Math.max(0, left) + 'px';
      tip.style.top = (box.top - outer.top + wrap.scrollTop + top * scale) + 'px';
      return {bar: j, start_us: start, text: rows.join('\n')};
    }

    svg.addEventListener('mousemove', function (e) {
      var p = point(e);
      if (drag !== null) {
        var x1 = Math.max(L, Math.min(drag, p.x)), x2 = Math.min(L + W, Math.max(drag, p.x));
        sel.setAttribute('x', x1);
        sel.setAttribute('width', x2 - x1);
        sel.setAttribute('visibility', 'visible');
      }
      if (inPlot(p)) hoverAt(tOf(p.x)); else hide();
    });
    svg.addEventListener('mouseleave', function () { hide(); });
    svg.addEventListener('wheel', function (e) {
      var p = point(e);
      if (!inPlot(p)) return;
      e.preventDefault();
      var t = tOf(p.x), f = e.deltaY < 0 ? 0.8 : 1.25;
      setView(t - (t - view[0]) * f, t + (view[1] - t) * f);
    }, {passive: false});
    svg.addEventListener('mousedown', function (e) {
      var p = point(e);
      if (inPlot(p)) { drag = p.x; e.preventDefault(); }
    });
    window.addEventListener('mouseup', function (e) {
      if (drag === null) return;
      var x = point(e).x, a = Math.min(drag, x), b = Math.max(drag, x);
      drag = null;
      sel.setAttribute('visibility', 'hidden');
      if (b - a > 4) setView(tOf(Math.max(a, L)), tOf(Math.min(b, L + W)));
    });
    svg.addEventListener('dblclick', function () { setView(T0, T1); });
    reset.addEventListener('click', function () { setView(T0, T1); });
    return {svg: svg, setView: setView, hoverAt: hoverAt, view: function () { return view.slice(); }};
  }
  var charts = [];
  var wraps = document.querySelectorAll('div.chart');
  for (var i = 0; i < wraps.length; i++) {
    var svg = wraps[i].querySelector('svg.ratelimit-sim-chart');
    if (svg) charts.push(setup(svg, wraps[i]));
  }
  window.ratelimitSimCharts = charts;
})();
)JS";

constexpr std::string_view kStyle = R"(
div.chart { position: relative; }
div.chart svg.ratelimit-sim-chart { cursor: crosshair; user-select: none; }
div.chart-tip { position: absolute; pointer-events: none; background: rgba(255,255,255,0.96);
  border: 1px solid #999; padding: 6px 8px; font-size: 12px; line-height: 1.4; white-space: pre;
  box-shadow: 0 1px 4px rgba(0,0,0,0.2); z-index: 2; }
div.chart-tip div.head { font-weight: bold; }
button.chart-reset { margin: 0 0 6px 0; font-size: 12px; }
p.hint { color: #555; font-size: 13px; }
)";

}  // namespace

std::string_view chart_script() { return kScript; }
std::string_view chart_script_style() { return kStyle; }

}  // namespace ratelimit::sim
