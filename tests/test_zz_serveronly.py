import pytest
from fakes import seamscope_forked

pytestmark = pytest.mark.torch


def test_server(tmp_path, fresh_server):
    assert seamscope_forked(fresh_server, ["--help"], tmp_path).returncode == 0
