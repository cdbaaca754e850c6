"""Ships native/interposer's sources inside the package (analyzer/_native/interposer),
so that an installed capscan (pip install ., pipx, uv tool) can build the interposer
on first use; everything else is in pyproject.toml."""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

NATIVE = Path(__file__).resolve().parent / "native" / "interposer"
SKIP = shutil.ignore_patterns("build", "__pycache__", "*.o", "*.so", "*.dylib")


class build_py_with_native_sources(build_py):
    def run(self):
        super().run()
        if (NATIVE / "Makefile").is_file():
            target = Path(self.build_lib) / "analyzer" / "_native" / "interposer"
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(NATIVE, target, ignore=SKIP)


setup(cmdclass={"build_py": build_py_with_native_sources})
