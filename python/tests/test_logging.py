"""crema is quiet as a Python library: importing it and building a net logs nothing below
WARNING, unless crema.set_log_level or GLOG_minloglevel asks for more."""
import os
import subprocess
import sys

import pytest

import crema

from test_net import LENET


def run(code, **env):
    environ = {k: v for k, v in os.environ.items() if k != 'GLOG_minloglevel'}
    environ.update(env)
    return subprocess.run([sys.executable, '-c', 'import crema; ' + code], capture_output=True,
                          text=True, env=environ)


def test_import_and_net_print_nothing():
    r = run('crema.Net(%r, crema.TEST); print(crema.get_log_level())' % LENET)
    assert r.returncode == 0, r.stderr
    assert r.stdout == 'WARNING\n' and r.stderr == ''


def test_set_log_level_and_glog_minloglevel_show_the_set_up():
    r = run("crema.set_log_level('info'); crema.Net(%r, crema.TEST)" % LENET)
    assert 'Setting up conv1' in r.stderr, r.stderr
    r = run('import logging; crema.set_log_level(logging.INFO); crema.Net(%r, crema.TEST)' % LENET)
    assert 'Setting up conv1' in r.stderr, r.stderr
    r = run('crema.Net(%r, crema.TEST)' % LENET, GLOG_minloglevel='0')
    assert 'Setting up conv1' in r.stderr, r.stderr


def test_log_levels():
    saved = crema.get_log_level()
    try:
        for level, name in [(0, 'INFO'), ('ERROR', 'ERROR'), (30, 'WARNING'), ('FATAL', 'FATAL')]:
            crema.set_log_level(level)
            assert crema.get_log_level() == name
        for bad in ['LOUD', 7, 25, None, True]:
            with pytest.raises(ValueError, match='set_log_level'):
                crema.set_log_level(bad)
    finally:
        crema.set_log_level(saved)
