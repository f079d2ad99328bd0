#!/usr/bin/env python3
"""check_docs.py — every fenced block and every internal link of README.md, CONTRIBUTING.md,
CHANGELOG.md, clients/README.md, clients/concurrency.md, clients/docs/ and docs/ is checked, so the
docs cannot go stale silently (ctest docs_blocks).

Usage: check_docs.py SOURCE_DIR BIN_DIR [PAGE...]

How each block is checked is said by a marker comment on a line before it,
`<!-- docs-test: KIND [argument] -->`, or inferred from its language:

  run                  a shell block, run as written with bash -e in a scratch directory (one
                       per page, shared by its blocks in order, as a reader would work) that
                       has build/bin, examples/, tools/ and scripts/ of this tree, inside a
                       private network and PID namespace when the kernel allows it (port 8080 is
                       then free, and nothing started can outlive the block); otherwise the
                       well-known ports are renamed to free ones. Default for sh blocks.
  run-with-server      the same, with ratelimitd already serving examples/ratelimit.yaml on
                       127.0.0.1:8080
  expect               the output (stdout + stderr) of the previous run block, byte for byte
  skip REASON          not run (needs root, runs forever, ...); a shell block is still parsed
                       by `bash -n`, and
                       every --flag given to a build/bin tool must be one its --help names
  config               ratelimitd's YAML: `ratelimitd --config FILE --check` must accept it
                       (a block without policies or domains gets one policy added). Default
                       for yaml blocks whose top-level keys are all ratelimitd's
  envoy-config         an envoyproxy/ratelimit descriptor file, loaded by --envoy-env --check.
                       Default for yaml blocks with a top-level `domain`
  yaml REASON          YAML another program reads (Traefik, Envoy, Kubernetes): parsed only
  excerpt PATH         must appear verbatim in PATH (a file of this tree)
  compile              C++: compiled (syntax and types) against include/ with the statements
                       wrapped in a function. Default for cpp blocks
  output REASON        sample output shown to the reader; REASON says what checks it, if
                       anything does

A block with no marker and no default (plain text, nginx, cmake, ...) fails the test: every
block is checked or carries its reason. Links: relative paths must exist, and #anchors must be
headings of the target page (GitHub's anchor rule). And docs/configuration.md must name every
key the configuration parser accepts (the check_map lists of src/server/**/*.cc).
"""
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mdparse  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
from loopback import die_with_parent, free_port  # noqa: E402

SRC, BIN = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
RATELIMITD = os.path.join(BIN, "ratelimitd")
BLOCK_SECONDS = 60
failures = []


def fail(block_or_path, line, what):
    failures.append(f"{block_or_path}:{line}: {what}")
    print(f"FAIL {block_or_path}:{line}: {what}", flush=True)


def pages():
    names = sys.argv[3:] or (["README.md", "CONTRIBUTING.md", "CHANGELOG.md", "clients/README.md", "clients/concurrency.md"] +
                             sorted("clients/docs/" + f for f in os.listdir(os.path.join(SRC, "clients/docs"))
                                    if f.endswith(".md")) +
                             sorted("docs/" + f for f in os.listdir(os.path.join(SRC, "docs")) if f.endswith(".md")) +
                             sorted("docs/benchmarks/" + f for f in os.listdir(os.path.join(SRC, "docs/benchmarks"))
                                    if f.endswith(".md")))
    return {n: mdparse.parse(os.path.join(SRC, n)) for n in names}


# ---- links -----------------------------------------------------------------------------------

def check_links(all_pages):
    cache = {}
    for name, page in all_pages.items():
        for line, target in page.links:
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(os.path.dirname(page.path), path)) if path else page.path
            if not os.path.exists(full):
                fail(name, line, f"link to a missing file: {target}")
                continue
            if anchor and full.endswith(".md"):
                if full not in cache:
                    cache[full] = mdparse.parse(full).anchors
                if anchor not in cache[full]:
                    fail(name, line, f"link to a missing anchor: {target} (headings: {sorted(cache[full])[:8]}...)")


# ---- configuration keys ------------------------------------------------------------------------

def check_config_keys():
    keys = set()
    server = os.path.join(SRC, "src/server")
    for f in sorted(os.path.join(d, n) for d, _, names in os.walk(server) for n in names):
        if f.endswith(".cc"):
            text = open(f).read()
            for m in re.finditer(r"check_map\([^;]*?\{([^{}]*)\}\)", text, re.S):
                keys.update(re.findall(r'"([a-z_]+)"', m.group(1)))
    if len(keys) < 20:
        fail("src/server", 0, f"found only {len(keys)} configuration keys in check_map lists: the parser moved?")
    doc = open(os.path.join(SRC, "docs/configuration.md")).read()
    for k in sorted(keys):
        if f"`{k}`" not in doc:
            fail("docs/configuration.md", 0, f"the parser accepts `{k}`, which this page does not name")


# ---- sandbox for shell blocks -------------------------------------------------------------------

def can_unshare():
    try:
        return subprocess.run(["unshare", "-r", "-n", "-p", "-f", "--kill-child", "-m", "--mount-proc", "true"],
                              capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


UNSHARE = can_unshare()
WELL_KNOWN_PORTS = ["8080", "8081", "6070", "6379", "6380", "7000", "7001", "7002", "9000", "9090", "9091"]


def scratch_dir():
    d = tempfile.mkdtemp(prefix="rl-docs-")
    os.makedirs(os.path.join(d, "build"))
    os.symlink(BIN, os.path.join(d, "build", "bin"))
    # The build's data (share/ratelimit/redis/ratelimit_<version>.lua), beside bin as in build/.
    os.symlink(os.path.join(os.path.dirname(BIN), "share"), os.path.join(d, "build", "share"))
    for sub in ("examples", "tools", "scripts", "packaging", "docs", "clients"):
        os.symlink(os.path.join(SRC, sub), os.path.join(d, sub))
    return d


SERVER_PRELUDE = """build/bin/ratelimitd --config examples/ratelimit.yaml --listen 127.0.0.1:8080 >ratelimitd.log 2>&1 &
rl_server=$!
for i in $(seq 100); do curl -sf localhost:8080/healthz >/dev/null && break; sleep 0.05; done
"""


def run_block(block, with_server, work):
    script = block.text
    if with_server:
        # The server may be gone already (a block that stopped it; ratelimitd exits within a
        # millisecond of SIGTERM when idle): cleanup, not a check.
        script = SERVER_PRELUDE + script + "\nkill $rl_server 2>/dev/null || true; wait $rl_server || true\n"
    if not UNSHARE:  # no private network: the ports the docs use become free ones
        for p in WELL_KNOWN_PORTS:
            script = re.sub(rf"\b{p}\b", str(free_port()), script)
    path = os.path.join(work, ".docs-block.sh")
    with open(path, "w") as f:
        f.write("set -e\nexport PATH=\"$PWD/build/bin:$PATH\"\n"
                "ip link set lo up 2>/dev/null || true\n" + script)
    cmd = (["unshare", "-r", "-n", "-p", "-f", "--kill-child", "-m", "--mount-proc"] if UNSHARE else ["setsid"]) + ["bash", path]
    # stdout and stderr interleaved, as a terminal shows them. The block runs in a session (and
    # process group) of its own: whatever it left running in the background — also when it
    # timed out or failed before its own `kill` — is killed with that group afterwards. (Under
    # unshare the private pid namespace does the same when its first process ends.)
    p = subprocess.Popen(cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         preexec_fn=die_with_parent)
    try:
        out, _ = p.communicate(timeout=BLOCK_SECONDS)
        code = p.returncode
    except subprocess.TimeoutExpired:
        p.kill()
        out, code = f"timed out after {BLOCK_SECONDS} s\n{p.communicate()[0] or ''}", -1
    finally:
        if not UNSHARE:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # setsid made the block's bash a group leader
            except ProcessLookupError:
                pass
    return code, out


# ---- flags of build/bin tools -----------------------------------------------------------------

_help = {}


def tool_help(tool, sub=None):
    key = (tool, sub)
    if key not in _help:
        args = [os.path.join(BIN, tool)] + ([sub] if sub else []) + ["--help"]
        r = subprocess.run(args, capture_output=True, text=True, timeout=20)
        _help[key] = r.stdout + r.stderr
    return _help[key]


def check_flags(block):
    # An unbounded `make -j` / `cmake --build -j` starts one compiler per target: on a small
    # machine that is swapping, not building. Every parallel build names its bound.
    for m in re.finditer(r"(?:cmake --build|make)\b[^\n]*?\s-j(?=\s|$)", block.text, re.M):
        fail(block.path, block.line, f"unbounded -j in: {m.group(0)} (write -j2 or -j\"$(nproc)\")")
    for line in re.sub(r"\\\n", " ", block.text).split("\n"):
        line = line.split(" #")[0]
        for m in re.finditer(r"(?:build/bin/|\b)(ratelimitd|ratelimit-sim|ratelimit-bench)\b([^|;&]*)", line):
            tool, rest = m.group(1), m.group(2)
            if not os.path.exists(os.path.join(BIN, tool)):
                continue
            words = rest.split()
            sub = words[0] if tool in ("ratelimit-bench", "ratelimit-sim") and words and not words[0].startswith("-") else None
            text = tool_help(tool, sub)
            for flag in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", rest):
                if flag not in text:
                    fail(block.path, block.line, f"{tool}{' ' + sub if sub else ''} has no flag {flag} (its --help does not name it)")


# ---- YAML -----------------------------------------------------------------------------------

def ratelimitd_keys():
    keys = set()
    text = open(os.path.join(SRC, "src/server/config/config.cc")).read()
    m = re.search(r'check_map\(root, "the configuration", \{([^}]*)\}', text)
    if m:
        keys.update(re.findall(r'"([a-z_]+)"', m.group(1)))
    return keys


def check_config(block, text):
    work = tempfile.mkdtemp(prefix="rl-docs-yaml-")
    try:
        if not re.search(r"^(policies|domains):", text, re.M):
            text += "policies:\n  docs_test: { algorithm: fixed_window, limit: 1, window: 1s }\n"
        path = os.path.join(work, "ratelimit.yaml")
        open(path, "w").write(text)
        r = subprocess.run([RATELIMITD, "--config", path, "--check"], capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            fail(block.path, block.line, f"ratelimitd --check refused the block: {r.stdout}{r.stderr}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def check_envoy_config(block):
    work = tempfile.mkdtemp(prefix="rl-docs-envoy-")
    try:
        os.makedirs(os.path.join(work, "config"))
        open(os.path.join(work, "config", "doc.yaml"), "w").write(block.text)
        env = dict(os.environ, RUNTIME_ROOT=work, RUNTIME_SUBDIRECTORY="", RUNTIME_APPDIRECTORY="config", USE_STATSD="false")
        r = subprocess.run([RATELIMITD, "--envoy-env", "--check"], capture_output=True, text=True, timeout=20, env=env)
        if r.returncode != 0:
            fail(block.path, block.line, f"ratelimitd --envoy-env --check refused the block: {r.stdout}{r.stderr}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def yaml_top_keys(text):
    return set(re.findall(r"^([A-Za-z_][A-Za-z0-9_]*):", text, re.M))


def parse_yaml(block):
    try:
        import yaml
        list(yaml.safe_load_all(block.text))
    except ImportError:
        pass
    except Exception as e:  # noqa: BLE001 — any parse error is the finding
        fail(block.path, block.line, f"not valid YAML: {e}")


# ---- C++ ---------------------------------------------------------------------------------------

def compile_cpp(block):
    includes = [l for l in block.text.split("\n") if l.startswith("#include")]
    body = "\n".join(l for l in block.text.split("\n") if not l.startswith("#include"))
    whole = "int main(" in body
    src = "\n".join(["#include <chrono>", "#include <iostream>", "#include <memory>", "#include <string>"] + includes)
    src += "\n" + (body if whole else "int docs_block() {\n" + body + "\nreturn 0;\n}\n")
    work = tempfile.mkdtemp(prefix="rl-docs-cpp-")
    try:
        path = os.path.join(work, "block.cc")
        open(path, "w").write(src)
        cxx = os.environ.get("CXX", "g++")
        r = subprocess.run([cxx, "-std=c++20", "-fsyntax-only", "-I", os.path.join(SRC, "include"),
                            "-I", os.path.join(os.path.dirname(BIN), "include"), path],
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            fail(block.path, block.line, "does not compile:\n" + r.stderr[-2000:])
    finally:
        shutil.rmtree(work, ignore_errors=True)


# ---- the blocks ----------------------------------------------------------------------------------

def check_blocks(all_pages):
    top_keys = ratelimitd_keys()
    counts = {}
    for name, page in all_pages.items():
        last_output = None
        work = None  # one scratch directory per page: a reader follows a page in one directory
        for b in page.blocks:
            kind, _, arg = b.marker.partition(" ")
            lang = b.lang
            if not kind:
                if lang in ("sh", "bash", "console"):
                    kind = "run"
                elif lang == "yaml":
                    keys = yaml_top_keys(b.text)
                    kind = "envoy-config" if "domain" in keys else "config" if keys and keys <= top_keys else ""
                elif lang == "cpp":
                    kind = "compile"
            counts[kind or "unchecked"] = counts.get(kind or "unchecked", 0) + 1
            where = f"{name}:{b.line}"
            if kind in ("run", "run-with-server"):
                check_flags(b)
                work = work or scratch_dir()
                code, out = run_block(b, kind == "run-with-server", work)
                last_output = out
                if code != 0:
                    fail(name, b.line, f"the block exits {code}:\n{out[-3000:]}")
                print(f"ran   {where} ({kind}, exit {code})", flush=True)
                continue
            if kind == "expect":
                if last_output is None:
                    fail(name, b.line, "an expect block must follow a run block")
                elif last_output != b.text:
                    fail(name, b.line, f"the previous block printed:\n{last_output}\nthe page shows:\n{b.text}")
                continue
            last_output = None
            if kind == "skip":
                if not arg:
                    fail(name, b.line, "skip needs a reason")
                r = subprocess.run(["bash", "-n"], input=b.text, capture_output=True, text=True)
                if lang in ("sh", "bash") and r.returncode != 0:
                    fail(name, b.line, f"not valid shell: {r.stderr}")
                check_flags(b)
            elif kind == "config":
                check_config(b, b.text)
            elif kind == "envoy-config":
                check_envoy_config(b)
            elif kind == "yaml":
                if not arg:
                    fail(name, b.line, "yaml needs a reason (which program reads it)")
                parse_yaml(b)
            elif kind == "excerpt":
                target = os.path.join(SRC, arg)
                if not arg or not os.path.isfile(target):
                    fail(name, b.line, f"excerpt of a missing file: {arg!r}")
                elif b.text not in open(target).read():
                    fail(name, b.line, f"not a verbatim excerpt of {arg}: copy the file's lines")
            elif kind == "compile":
                compile_cpp(b)
            elif kind == "output":
                if not arg:
                    fail(name, b.line, "output needs a reason (what checks it, or why nothing can)")
            else:
                fail(name, b.line, f"a ```{lang} block with no docs-test marker: say how it is checked"
                                   " (<!-- docs-test: run|skip REASON|excerpt PATH|output REASON|... -->)")
        if work:
            shutil.rmtree(work, ignore_errors=True)
    print("blocks:", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))


def main():
    print(f"sandbox: {'private network and PID namespace' if UNSHARE else 'well-known ports renamed'}")
    all_pages = pages()
    check_links(all_pages)
    if not sys.argv[3:]:
        check_config_keys()
    check_blocks(all_pages)
    if failures:
        sys.exit(f"{len(failures)} problem(s) in the docs")
    print("ok")


main()
