"""Packages build/python/crema (the C++ extension CMake builds, the Python modules, the
crema.proto classes) with libcrema.so copied beside the extension, whose RPATH includes $ORIGIN.
CREMA_BUILD_DIR picks the CMake build folder (default: ../build); when the extension is missing
there, CMake configures and builds it (target crema_python)."""
import glob
import os
import shutil
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(HERE)


def build_dir():
    return os.path.abspath(os.environ.get('CREMA_BUILD_DIR', os.path.join(SOURCE, 'build')))


def built_package():
    package = os.path.join(build_dir(), 'python', 'crema')
    if not glob.glob(os.path.join(package, '_crema*.so')):
        subprocess.check_call(['cmake', '-S', SOURCE, '-B', build_dir(), '-DCMAKE_BUILD_TYPE=Release',
                               '-DCREMA_PYTHON=ON', '-DPython3_EXECUTABLE=' + sys.executable])
        subprocess.check_call(['cmake', '--build', build_dir(), '--target', 'crema_python',
                               'crema_python_files'])
    return package


class BuildPy(build_py):
    """Copies the CMake-built package (and libcrema.so) instead of python/crema alone."""

    def run(self):
        source = built_package()
        target = os.path.join(self.build_lib, 'crema')
        if os.path.exists(target):
            shutil.rmtree(target)
        shutil.copytree(source, target, ignore=shutil.ignore_patterns('__pycache__'))
        for lib in glob.glob(os.path.join(build_dir(), 'libcrema.so*')):
            shutil.copy2(lib, target)


class BinaryDistribution(Distribution):
    def has_ext_modules(self):
        return True


setup(packages=['crema'], package_dir={'': '.'},
      cmdclass={'build_py': BuildPy}, distclass=BinaryDistribution)
