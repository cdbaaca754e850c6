"""analyzer.output.atomic: a file written whole or not at all, never through a planted symlink, with the
mode a new file gets under the umask or the mode of the file it replaces (issue 37)."""

from __future__ import annotations

import os
import stat

import pytest

from analyzer.output.atomic import mode_for, write_atomically


@pytest.fixture
def umask_027():
    old = os.umask(0o027)
    yield
    os.umask(old)


def test_new_file_gets_the_umask_mode_and_the_text(tmp_path, umask_027):
    out = tmp_path / "page.html"
    assert write_atomically(str(out), lambda fh: fh.write("é\n"), prefix=".t-") == 2
    assert out.read_text(encoding="utf-8") == "é\n" and stat.S_IMODE(out.stat().st_mode) == 0o640
    assert os.listdir(tmp_path) == ["page.html"]


def test_replaced_file_keeps_its_mode_but_no_set_id_bit(tmp_path, umask_027):
    out = tmp_path / "x"
    out.write_text("old")
    out.chmod(0o4755)
    assert mode_for(str(out)) == 0o755
    write_atomically(str(out), lambda fh: fh.write("new"), prefix=".t-")
    assert stat.S_IMODE(out.stat().st_mode) == 0o755 and out.read_text() == "new"


def test_a_failing_writer_leaves_the_old_file_and_no_temp(tmp_path):
    out = tmp_path / "x"
    out.write_text("old")

    def boom(fh):
        fh.write("half")
        raise OSError(28, "No space left on device")
    with pytest.raises(OSError):
        write_atomically(str(out), boom, prefix=".t-")
    assert out.read_text() == "old" and os.listdir(tmp_path) == ["x"]


def test_a_directory_in_the_way_is_an_os_error_and_leaves_nothing(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(OSError):
        write_atomically(str(tmp_path / "d"), lambda fh: fh.write("x"), prefix=".t-")
    assert os.listdir(tmp_path) == ["d"] and os.listdir(tmp_path / "d") == []
