"use strict";
(function () {
  var data = JSON.parse(document.getElementById("report-data").textContent);
  var MAX_ROWS = 500;
  var MAX_BARS = 25;
  var VERDICTS = ["ok", "warning", "error", "unreachable"];
  var SEVERITIES = ["error", "warning", "info"];
  var outlierSet = Object.create(null);  // no prototype: a host named "constructor" is no outlier
  data.outlier_hosts.forEach(function (h) { outlierSet[h] = true; });

  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) {
      if (key === "text") { node.textContent = attrs[key]; } else { node.setAttribute(key, attrs[key]); }
    });
    (children || []).forEach(function (child) {
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return node;
  }
  function clear(node) { while (node.firstChild) { node.removeChild(node.firstChild); } }
  // a findings row: [host index, severity, rule, message, found, expected, fix, source, action]
  function findingCells(f, host) {
    return [
      el("td", {"class": "host-name", text: host}),
      el("td", {"class": "sev sev-" + f[1], text: f[1]}),
      el("td", {"class": "rule", title: f[3], text: f[2]}),
      el("td", {"class": "action", text: f[8] ? f[8] : ""}),
      el("td", {text: f[4] === null ? "" : f[4]}),
      el("td", {text: f[5] === null ? "" : f[5]}),
      el("td", {title: f[7] || "", text: f[6] === null ? "" : f[6]})
    ];
  }
  function stackLabel(stack) {
    var driver = stack.driver_loaded !== "-" ? stack.driver_loaded :
      (stack.driver_installed !== "-" ? stack.driver_installed + " (not loaded)" : "none");
    var cuda = stack.cuda_default !== "-" ? stack.cuda_default : stack.cuda_toolkits;
    return "driver " + driver + " · CUDA " + cuda + " · cuDNN " + stack.cudnn +
      " · GPUs " + stack.gpus + " · " + stack.os + " · kernel " + stack.kernel;
  }

  // header
  var meta = data.meta;
  var parts = ["generated " + (meta.generated_at || "unknown"), "gpuhost " + (meta.gpuhost_version || "?"),
    "matrix data " + (meta.matrix_date || "unknown") + (meta.data_origin ? " (" + meta.data_origin + ")" : "")];
  if (meta.inventory) { parts.push("inventory " + meta.inventory); }
  if (meta.merged_from) { parts.push("merged from " + meta.merged_from.length + " report(s)"); }
  document.getElementById("meta").textContent = parts.join(" · ");

  // verdict counts
  var verdicts = document.getElementById("verdicts");
  verdicts.appendChild(el("div", {"class": "card total", "data-verdict": "hosts"},
    [el("b", {text: String(data.hosts.length)}), "hosts · overall " + (data.verdict || "?")]));
  VERDICTS.forEach(function (v) {
    verdicts.appendChild(el("div", {"class": "card " + v, "data-verdict": v},
      [el("b", {text: String(data.verdicts[v] || 0)}), v]));
  });
  verdicts.appendChild(el("div", {"class": "counts"}, [SEVERITIES.map(function (s) {
    return (data.counts[s] || 0) + " " + s;
  }).join(" · ") + " findings"]));

  // security exposure: its own verdict and findings, never in the verdict counts above
  var exposed = {};
  data.security.findings.forEach(function (f) { exposed[f[0]] = true; });
  document.getElementById("security-note").textContent = "verdict " + (data.security.verdict || "?") +
    " · " + Object.keys(exposed).length + " host(s) affected by NVIDIA security bulletins" +
    " (not counted in the verdict above)";
  var securityBody = document.querySelector("#security-findings tbody");
  data.security.findings.slice(0, MAX_ROWS).forEach(function (f) {
    var host = data.hosts[f[0]][0];
    securityBody.appendChild(el("tr", {"data-rule": f[2], "data-severity": f[1], "data-host": host}, findingCells(f, host)));
  });

  // hosts per stack group
  var hostsOfGroup = data.stacks.map(function () { return []; });
  data.hosts.forEach(function (h) { if (h[2] >= 0) { hostsOfGroup[h[2]].push(h[0]); } });

  function stackTable(stack, majority) {
    var body = data.fields.map(function (f) {
      var differs = majority && majority[f[0]] !== stack[f[0]];
      var cells = [el("th", {text: f[1]}), el("td", {"class": differs ? "differs" : "", text: stack[f[0]]})];
      if (majority) { cells.push(el("td", {"class": "note", text: differs ? "majority: " + majority[f[0]] : ""})); }
      return el("tr", {}, cells);
    });
    return el("table", {"class": "stack"}, [el("tbody", {}, body)]);
  }

  // stack chart
  var chart = document.getElementById("stack-chart");
  var most = data.stacks.length ? data.stacks[0].count : 1;
  var shown = data.stacks.slice(0, MAX_BARS);
  document.getElementById("stack-note").textContent = data.stacks.length + " distinct stack(s)" +
    (data.stacks.length > MAX_BARS ? ", the " + MAX_BARS + " largest shown" : "") + " (click a bar for its hosts)";
  shown.forEach(function (group, index) {
    var bar = el("div", {"class": "bar" + (index > 0 ? " minority" : ""), role: "listitem", "data-group": String(index),
      title: stackLabel(group.stack)}, [
      el("div", {"class": "label", text: "[" + (index + 1) + "] " + stackLabel(group.stack)}),
      el("div", {"class": "track"}, [el("div", {"class": "fill", style: "width:" + (100 * group.count / most).toFixed(2) + "%"})]),
      el("div", {"class": "n", text: String(group.count)})
    ]);
    bar.addEventListener("click", function () { showGroup(index, bar); });
    chart.appendChild(bar);
  });
  if (data.stacks.length > MAX_BARS) {
    var rest = data.stacks.slice(MAX_BARS).reduce(function (n, g) { return n + g.count; }, 0);
    chart.appendChild(el("p", {"class": "note", text: (data.stacks.length - MAX_BARS) + " smaller stack(s) with " + rest + " host(s) not drawn"}));
  }
  if (!data.stacks.length) { chart.appendChild(el("p", {"class": "note", text: "no reachable host"})); }

  function showGroup(index, bar) {
    Array.prototype.forEach.call(chart.querySelectorAll(".bar.selected"), function (b) { b.classList.remove("selected"); });
    bar.classList.add("selected");
    var detail = document.getElementById("stack-detail");
    clear(detail);
    var names = hostsOfGroup[index];
    detail.appendChild(el("div", {"class": "detail"}, [
      el("h3", {text: "stack [" + (index + 1) + "]: " + names.length + " host(s)"}),
      stackTable(data.stacks[index].stack, index > 0 ? data.stacks[0].stack : null),
      el("p", {text: names.slice(0, 300).join(", ") + (names.length > 300 ? " … and " + (names.length - 300) + " more" : "")})
    ]));
  }

  // outliers
  var outliers = document.getElementById("outliers");
  document.getElementById("outlier-note").textContent = data.outliers.length ?
    "(hosts outside the largest stack group; differing fields highlighted)" : "";
  if (!data.outliers.length) {
    outliers.appendChild(el("p", {"class": "note", text: data.stacks.length > 1 ?
      "no single majority stack to compare with" : "none: every reachable host runs the same stack"}));
  } else {
    var fieldsUsed = data.fields.filter(function (f) {
      return data.outliers.some(function (o) { return f[0] in o.differs; });
    });
    var head = el("tr", {}, [el("th", {text: "host"})].concat(fieldsUsed.map(function (f) { return el("th", {text: f[1]}); })));
    var rows = data.outliers.slice(0, MAX_ROWS).map(function (o) {
      return el("tr", {"class": "outlier"}, [el("td", {text: o.host})].concat(fieldsUsed.map(function (f) {
        var d = o.differs[f[0]];
        return d ? el("td", {"class": "differs", title: "majority: " + d.majority, text: d.found + " (majority " + d.majority + ")"}) : el("td", {text: ""});
      })));
    });
    outliers.appendChild(el("table", {id: "outlier-table"}, [el("thead", {}, [head]), el("tbody", {}, rows)]));
    if (data.outliers.length > MAX_ROWS) { outliers.appendChild(el("p", {"class": "note", text: "first " + MAX_ROWS + " of " + data.outliers.length + " shown"})); }
  }

  // findings table + filters
  var ruleSelect = document.getElementById("f-rule");
  var sevSelect = document.getElementById("f-severity");
  var hostInput = document.getElementById("f-host");
  var rules = Object.create(null);
  data.findings.forEach(function (f) { rules[f[2]] = (rules[f[2]] || 0) + 1; });
  Object.keys(rules).sort().forEach(function (r) { ruleSelect.appendChild(el("option", {value: r, text: r + " (" + rules[r] + ")"})); });
  SEVERITIES.forEach(function (s) { sevSelect.appendChild(el("option", {value: s, text: s + " (" + (data.counts[s] || 0) + ")"})); });
  var tbody = document.querySelector("#findings tbody");

  function renderFindings() {
    var rule = ruleSelect.value, sev = sevSelect.value, needle = hostInput.value.trim().toLowerCase();
    var matching = data.findings.filter(function (f) {
      return (!rule || f[2] === rule) && (!sev || f[1] === sev) &&
        (!needle || data.hosts[f[0]][0].toLowerCase().indexOf(needle) >= 0);
    });
    clear(tbody);
    var fragment = document.createDocumentFragment();
    matching.slice(0, MAX_ROWS).forEach(function (f) {
      var host = data.hosts[f[0]][0];
      var row = el("tr", {"class": outlierSet[host] ? "outlier" : "", "data-rule": f[2], "data-severity": f[1], "data-host": host}, findingCells(f, host));
      fragment.appendChild(row);
    });
    tbody.appendChild(fragment);
    tbody.setAttribute("data-filter", [rule, sev, needle].join("|"));
    document.getElementById("f-count").textContent = matching.length > MAX_ROWS ?
      "first " + MAX_ROWS + " of " + matching.length + " matching findings shown" :
      matching.length + " of " + data.findings.length + " finding(s)";
  }
  // Typing re-filters once the keys pause (thousands of findings).
  function debounced(fn) {
    var timer = null;
    return function () { clearTimeout(timer); timer = setTimeout(fn, 120); };
  }
  [ruleSelect, sevSelect].forEach(function (s) { s.addEventListener("change", renderFindings); });
  hostInput.addEventListener("input", debounced(renderFindings));
  renderFindings();

  // hosts, stack on demand
  var hostBox = document.getElementById("hosts");
  var hostFilter = document.getElementById("h-filter");
  function renderHosts() {
    var needle = hostFilter.value.trim().toLowerCase();
    clear(hostBox);
    var fragment = document.createDocumentFragment();
    data.hosts.forEach(function (h, index) {
      if (needle && h[0].toLowerCase().indexOf(needle) < 0) { return; }
      var chip = el("span", {"class": "host v-" + h[1] + (outlierSet[h[0]] ? " outlier" : ""), "data-host": h[0], title: h[1], text: h[0]});
      chip.addEventListener("click", function () { showHost(index, chip); });
      fragment.appendChild(chip);
    });
    hostBox.appendChild(fragment);
  }
  function showHost(index, chip) {
    Array.prototype.forEach.call(hostBox.querySelectorAll(".host.selected"), function (c) { c.classList.remove("selected"); });
    chip.classList.add("selected");
    var h = data.hosts[index];
    var detail = document.getElementById("host-detail");
    clear(detail);
    var children = [el("h3", {text: h[0] + ": " + h[1] + (outlierSet[h[0]] ? " (outlier)" : "")})];
    if (h[2] >= 0) {
      children.push(stackTable(data.stacks[h[2]].stack, h[2] > 0 && data.outliers.length ? data.stacks[0].stack : null));
    } else {
      children.push(el("p", {"class": "note", text: "no stack: the host could not be read"}));
    }
    var own = data.findings.filter(function (f) { return f[0] === index; });
    children.push(el("ul", {}, own.map(function (f) { return el("li", {"class": "sev-" + f[1], text: f[1] + " " + f[2] + ": " + f[3]}); })));
    var ownSecurity = data.security.findings.filter(function (f) { return f[0] === index; });
    children.push(el("p", {"class": "security-verdict", text: "security: " + h[3]}));
    children.push(el("ul", {"class": "security"}, ownSecurity.map(function (f) { return el("li", {"class": "sev-" + f[1], text: f[1] + " " + f[2] + ": " + f[3]}); })));
    detail.appendChild(el("div", {"class": "detail", id: "host-stack"}, children));
  }
  hostFilter.addEventListener("input", debounced(renderHosts));
  renderHosts();
  document.body.setAttribute("data-ready", "1");
})();
