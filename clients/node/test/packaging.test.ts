// packaging.test.ts — the package as an app installs it (issue 31 defect 4): ioredis is a peer
// range, so `npm install ioredis` in the app gives one copy, the app's own client type-checks as
// the `redis` option, and engines are at least ioredis's; `npm pack` carries the function library
// and the compiled code; on a fresh checkout (no typescript yet) pack says to run `npm ci` instead
// of failing with 127.
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const PKG = path.resolve(__dirname, '..', '..'); // dist-test/test -> the package
const pkg = JSON.parse(fs.readFileSync(path.join(PKG, 'package.json'), 'utf8'));
const minMajor = (range: string) => Number(/>=\s*(\d+)/.exec(range)?.[1]);

test('ioredis is a peer range, not a pinned dependency; engines cover ioredis', () => {
  assert.equal(pkg.dependencies?.ioredis, undefined, 'a pinned dependency nests a second ioredis beside the app\'s');
  assert.match(pkg.peerDependencies.ioredis, /^\^\d+\.\d+\.\d+$/);
  const ioredis = JSON.parse(fs.readFileSync(path.join(PKG, 'node_modules', 'ioredis', 'package.json'), 'utf8'));
  assert.ok(minMajor(pkg.engines.node) >= minMajor(ioredis.engines.node), `engines ${pkg.engines.node} below ioredis's ${ioredis.engines.node}`);
});

test('npm pack carries the function library and the compiled code', () => {
  const r = spawnSync('npm', ['pack', '--dry-run', '--json', '--loglevel=error'], { cwd: PKG, encoding: 'utf8', timeout: 120_000 });
  assert.equal(r.status, 0, r.stderr);
  const files: string[] = JSON.parse(r.stdout.slice(r.stdout.indexOf('[')))[0].files.map((f: { path: string }) => f.path);
  assert.ok(files.some((f) => /^library\/ratelimit_[0-9a-f]{12}\.lua$/.test(f)), files.join(' '));
  assert.ok(files.includes('dist/index.js') && files.includes('dist/index.d.ts'), files.join(' '));
});

test('pack on a fresh checkout (no typescript installed) says to run npm ci', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'rl-node-fresh-'));
  try {
    fs.cpSync(path.join(PKG, 'scripts'), path.join(dir, 'scripts'), { recursive: true });
    fs.copyFileSync(path.join(PKG, 'tsconfig.json'), path.join(dir, 'tsconfig.json'));
    const r = spawnSync('node', [path.join(dir, 'scripts', 'compile.js')], { cwd: dir, encoding: 'utf8', timeout: 60_000 });
    assert.equal(r.status, 1);
    assert.match(r.stderr, /run `npm ci`/);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
