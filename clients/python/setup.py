"""setup.py — only the build step that bundles the Redis function library into the package
(issue 31 defect 5: without it the constructor raised library_missing unless
RATELIMIT_REDIS_LIBRARY was set). The metadata is pyproject.toml's. The library comes from
RATELIMIT_REDIS_LIBRARY (a file, or a directory holding one ratelimit_<version>.lua), else the
build of this checkout (../../build/share/ratelimit/redis); a build without either fails, as
Node's `npm pack` does, rather than ship a package that cannot decide."""
import os
import re
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def library_file() -> str:
    src = os.environ.get("RATELIMIT_REDIS_LIBRARY") or os.path.join(HERE, "..", "..", "build", "share", "ratelimit", "redis")
    if os.path.isdir(src):
        found = [f for f in os.listdir(src) if re.match(r"^ratelimit_[0-9a-f]{12}\.lua$", f)]
        if len(found) != 1:
            raise SystemExit(f"{src}: expected one ratelimit_<version>.lua, found {len(found)} (build ratelimit first)")
        src = os.path.join(src, found[0])
    if not os.path.isfile(src):
        raise SystemExit(f"{src}: no ratelimit function library (build ratelimit first, or set RATELIMIT_REDIS_LIBRARY)")
    return src


class BundleLibrary(build_py):
    def run(self):
        super().run()
        out = os.path.join(self.build_lib, "ratelimit_client", "library")
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        src = library_file()
        shutil.copyfile(src, os.path.join(out, os.path.basename(src)))


setup(cmdclass={"build_py": BundleLibrary})
