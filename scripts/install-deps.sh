#!/usr/bin/env bash
# Installs what gcapture needs from Debian's packages, only what is missing. Safe to run again.
set -euo pipefail

packages=(
  pkg-config
  libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev
  gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-base-apps
  gstreamer1.0-plugins-good gstreamer1.0-plugins-bad gstreamer1.0-plugins-ugly gstreamer1.0-libav
  gstreamer1.0-pulseaudio pulseaudio pulseaudio-utils
  libjpeg-dev
  # The photo library's index (GRDB builds on the system's SQLite).
  libsqlite3-dev
  # jpegtran: the web tests' slow (progressive) photos.
  libjpeg-turbo-progs
  ffmpeg libimage-exiftool-perl v4l-utils
  # The preview's X sinks (ximagesink, xvimagesink; glimagesink), and a display without a screen for its tests
  # (Xvfb) with xwd to take screenshots of it.
  gstreamer1.0-x gstreamer1.0-gl xvfb x11-apps
  # A photo viewer's reading of EXIF orientation for the orientation tests (Pillow's exif_transpose).
  python3-pil
  # Publishing over RTSP (rtspclientsink), and the servers the stream tests publish to: nginx with its RTMP
  # module, srt-live-transmit.
  gstreamer1.0-rtsp nginx libnginx-mod-rtmp srt-tools
  # A gst-rtsp-server that accepts RECORD, for the RTSP publishing test.
  python3-gi gir1.2-gst-rtsp-server-1.0
  # The shells whose completion scripts the tests check (bash is there), man to render the man page, and
  # systemd-analyze for the kiosk's units (Examples/kiosk).
  zsh fish man-db systemd
  # The web page's browser test: headless Chromium, its driver, Selenium for Debian's Python; unzip reads the
  # gallery's zip downloads.
  chromium chromium-driver python3-selenium unzip
  # HTTPS for the web page's tests: openssl makes a test authority and certificate, curl checks the chain,
  # certutil (libnss3-tools) makes Chromium trust that authority.
  openssl curl libnss3-tools
  # The RotationCoordinator's tests: a private D-Bus bus with a stand-in iio-sensor-proxy in Python (GIO).
  dbus-daemon python3 python3-gi
  # motion (Debian's 4.5.1), what `gcapture-bench --only motion-vs` measures the motion output against.
  motion
  # The C++ runtime linked into the shipped build (scripts/build-release.sh); the Swift toolchain needs it too.
  libstdc++-12-dev
  # The WebRTC live view: webrtcbin's headers (its library is in plugins-bad) and ICE (libnice's elements);
  # venv for the WebRTC tests' Python environment (aiortc, below): Debian packages no aiortc.
  libgstreamer-plugins-bad1.0-dev gstreamer1.0-nice python3-venv
  # The WebRTC tests' GStreamer peer (a WHEP viewer and a WHIP receiver in Python: webrtcbin's introspection data).
  gir1.2-gst-plugins-bad-1.0
)

missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done

if ((${#missing[@]})); then
  echo "gcapture: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
  # Debian enables motion's daemon on install: it would hold /dev/video0 (and serve on port 8080) under every
  # camera test. The benchmark runs motion itself, with a config of its own.
  if [[ " ${missing[*]} " == *" motion "* ]] && command -v systemctl >/dev/null; then
    $sudo systemctl disable --now motion.service >/dev/null 2>&1 || true
  fi
fi

# The WebRTC tests' WHEP client (Tests/GCaptureTests/WebRTC/whep_client.py) runs on aiortc from PyPI, in a venv
# of Debian's Python (not a pyenv one on PATH) so the system's packages stay untouched.
webrtc_venv="${GCAPTURE_WEBRTC_VENV:-$HOME/.cache/gcapture/webrtc-venv}"
if ! "$webrtc_venv/bin/python" -c "import aiortc" >/dev/null 2>&1; then
  echo "gcapture: installing aiortc into $webrtc_venv" >&2
  [ -x "$webrtc_venv/bin/python" ] || /usr/bin/python3 -m venv "$webrtc_venv" >/dev/null
  log="$(mktemp)"
  "$webrtc_venv/bin/python" -m pip install -q --disable-pip-version-check aiortc==1.16.0 >"$log" 2>&1 \
    || { cat "$log" >&2; rm -f "$log"; exit 1; }
  rm -f "$log"
fi

command -v swift >/dev/null || { echo "gcapture: Swift 6 is required (https://swift.org/install)" >&2; exit 1; }
