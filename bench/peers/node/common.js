'use strict';
// Shared pieces of the Node peer benchmarks (bench/peers/node/*.js): the workload constants of
// bench/peers/README.md, the JSON-lines report and the CPU accounting of server processes.
// Every figure is one JSON object on one line of stdout, so the drivers can collect and
// summarize them (bench/peers/summarize.py) beside the C++ figures of the same run.
const fs = require('fs');

// An "allow limit": never reached during a run, so every decision is an admitted one.
const ALLOW_POINTS = 1e9;
const ALLOW_WINDOW_S = 60;

function envNumber(name, fallback) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const v = Number(raw);
  if (!Number.isFinite(v) || v <= 0) {
    throw new Error(`${name} must be a positive number, got '${raw}'`);
  }
  return v;
}

const settings = {
  warmupS: envNumber('WARMUP_S', 1),
  measureS: envNumber('MEASURE_S', 3),
  nkeys: envNumber('NKEYS', 100000),
};

// The key set of a workload, built before timing: 'k0' for the hot key, k0..k(n-1) otherwise.
function keySet(mode) {
  if (mode === 'hot') return ['k0'];
  if (mode === 'keys') return Array.from({ length: settings.nkeys }, (_, i) => 'k' + i);
  throw new Error(`unknown key mode '${mode}' (hot|keys)`);
}

function emitter(peer) {
  return (workload, metric, value, unit, extra = {}) => {
    process.stdout.write(JSON.stringify({ peer, workload, metric, value, unit, ...extra }) + '\n');
  };
}

// utime + stime of the given pids, in seconds (Linux /proc; USER_HZ is 100 on Debian kernels).
const USER_HZ = 100;
function cpuSeconds(pids) {
  let ticks = 0;
  for (const pid of pids) {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    ticks += Number(fields[11]) + Number(fields[12]);
  }
  return ticks / USER_HZ;
}

// Percentile of a sorted Float64Array (nearest rank, as the C++ tools report).
function percentile(sorted, p) {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

const nowNs = () => process.hrtime.bigint();
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

module.exports = {
  ALLOW_POINTS, ALLOW_WINDOW_S, settings, keySet, emitter, cpuSeconds, percentile, nowNs, sleep,
};
