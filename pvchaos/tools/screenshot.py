"""Screenshots of pages with headless Chromium, so tests can look at what a person sees.

Used to check that the HTML report really renders (a report that only says "Loading"
passes every file-level check). Also a stdlib PNG reader, so a test can tell a rendered
page from a blank one without adding an imaging dependency.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

CHROMIUM_NAMES = ("chromium", "chromium-browser")
INSTALL_HINT = "install it with `apt-get install -y chromium`"
SHOT_TIMEOUT_S = 120
_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
          "--disable-background-networking", "--disable-component-update", "--disable-sync",
          "--hide-scrollbars", "--virtual-time-budget=8000")


class ScreenshotError(RuntimeError):
    """No browser, or it produced no picture; the message is one line saying why."""


def find_chromium() -> str | None:
    """/usr/bin/chromium, else a chromium on PATH."""
    if os.access("/usr/bin/chromium", os.X_OK):
        return "/usr/bin/chromium"
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


def _apt_install() -> bool:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    cmd = ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]
    if subprocess.run(cmd, env=env, capture_output=True, check=False).returncode == 0:
        return True
    # A fresh machine has no package lists yet: fetch them once and try again.
    subprocess.run(["apt-get", "update"], env=env, capture_output=True, check=False)
    return subprocess.run(cmd, env=env, capture_output=True, check=False).returncode == 0


def ensure_chromium() -> str:
    """Return a Chromium path, installing Debian's package first when we are root."""
    found = find_chromium()
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get") and _apt_install():
        found = find_chromium()
        if found:
            return found
    raise ScreenshotError(f"chromium: not found; {INSTALL_HINT}")


def _to_url(target: str | Path) -> str:
    text = str(target)
    if "://" in text:
        return text
    path = Path(text).resolve()
    if path.is_dir():
        path = path / "index.html"
    if not path.exists():
        raise ScreenshotError(f"{path}: no such file to screenshot")
    return path.as_uri()


def screenshot(url_or_path: str | Path, png_path: str | Path, width: int = 1400,
               height: int = 900) -> Path:
    """Render a URL, HTML file or report directory to a PNG and return the PNG's path."""
    browser = find_chromium()
    if not browser:
        raise ScreenshotError(f"chromium: not found; {INSTALL_HINT}")
    url = _to_url(url_or_path)
    png = Path(png_path).resolve()
    png.parent.mkdir(parents=True, exist_ok=True)
    png.unlink(missing_ok=True)
    profile = tempfile.mkdtemp(prefix="pvchaos-chromium-")
    cmd = [browser, *_FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}",
           f"--screenshot={png}", url]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=SHOT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise ScreenshotError(f"chromium: no screenshot of {url} within {SHOT_TIMEOUT_S}s") from None
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    if not png.is_file() or png.stat().st_size == 0:
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        raise ScreenshotError(f"chromium wrote no {png.name} (exit {proc.returncode}): "
                              f"{lines[-1] if lines else 'no output'}")
    return png


# --- a small PNG reader (8-bit RGB/RGBA/grey, non-interlaced: what Chromium writes) -------

@dataclass(frozen=True)
class Png:
    width: int
    height: int
    channels: int
    rows: list[bytes]

    def pixel(self, x: int, y: int) -> tuple[int, ...]:
        start = x * self.channels
        return tuple(self.rows[y][start:start + self.channels])


def _unfilter(kind: int, line: bytearray, prev: bytes, bpp: int) -> bytearray:
    if kind == 0:
        return line
    if kind == 2:
        return bytearray((a + b) & 0xFF for a, b in zip(line, prev, strict=False))  # a truncated last row is short
    out = bytearray(line)
    for i in range(len(out)):
        left = out[i - bpp] if i >= bpp else 0
        up = prev[i]
        if kind == 1:
            out[i] = (out[i] + left) & 0xFF
        elif kind == 3:
            out[i] = (out[i] + ((left + up) >> 1)) & 0xFF
        elif kind == 4:
            up_left = prev[i - bpp] if i >= bpp else 0
            p = left + up - up_left
            pa, pb, pc = abs(p - left), abs(p - up), abs(p - up_left)
            pred = left if pa <= pb and pa <= pc else (up if pb <= pc else up_left)
            out[i] = (out[i] + pred) & 0xFF
        else:
            raise ValueError(f"PNG filter type {kind} is not defined")
    return out


def read_png(path: str | Path) -> Png:
    """Decode a PNG into rows of pixel bytes with zlib and struct only."""
    data = Path(path).read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG")
    pos, idat, header = 8, bytearray(), None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    if header is None:
        raise ValueError(f"{path}: no IHDR chunk")
    width, height, depth, colour, _, _, interlace = header
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(colour)
    if depth != 8 or channels is None or interlace:
        raise ValueError(f"{path}: only 8-bit non-interlaced grey/RGB/RGBA PNGs are read")
    raw, stride = zlib.decompress(bytes(idat)), width * channels
    rows, prev = [], bytes(stride)
    for y in range(height):
        start = y * (stride + 1)
        line = _unfilter(raw[start], bytearray(raw[start + 1:start + 1 + stride]), prev, channels)
        rows.append(bytes(line))
        prev = rows[-1]
    return Png(width, height, channels, rows)
