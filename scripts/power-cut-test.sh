#!/usr/bin/env bash
# A real power cut right after `gcapture record` says finished (issue 24): inside ../shared/testbed/v4l2-vm
# (a real kernel; its root file system is a 9p overlay, so the movie goes to an ext4 image loop-mounted from
# a file in the shared checkout), the recording ends and the machine is reset at once (sysrq b: no sync, no
# unmount). A second boot mounts the image (ext4 replays its journal) and checks that clip.mp4 plays in full
# (every frame the command reported) and that no recovery sidecar or temporary copy is left.
#
#   scripts/power-cut-test.sh [--gcapture PATH]    (default .build/debug/gcapture; exit 0 = the movie survived)
set -euo pipefail
cd "$(dirname "$0")/.."
gcapture=.build/debug/gcapture
if [ "${1:-}" = --gcapture ]; then gcapture=$2; fi
[ -x "$gcapture" ] || { echo "power-cut-test: $gcapture is not built" >&2; exit 2; }
vm=../shared/testbed/v4l2-vm
[ -x "$vm" ] || { echo "power-cut-test: $vm is missing" >&2; exit 2; }

work=.build/power-cut
rm -rf "$work"; mkdir -p "$work"
image=$PWD/$work/disk.img
truncate -s 256M "$image"
mkfs.ext4 -q -F "$image"

# First boot: record 3 s, then cut the power the moment the command returns. A small picture (--preset low):
# under TCG the test camera's 720p and its H.264 encode crawl (7 frames in a minute). stdout is virtio-serial,
# written to the host as the guest writes it, so the lines printed before the cut are kept.
set +e
"$vm" --timeout 300 --quiet -- bash -c "
  modprobe loop && modprobe ext4 && mkdir -p /mnt/x && mount -o loop '$image' /mnt/x || exit 3
  '$gcapture' record --camera test --microphone none --preset low --duration 3 --output /mnt/x/clip.mp4 --json > '$PWD/$work/record.json'
  echo \"record exit \$?\"
  echo 1 > /proc/sys/kernel/sysrq
  echo b > /proc/sysrq-trigger
  sleep 30; echo 'still running after sysrq b'" > "$work/boot1.out" 2> "$work/boot1.err"
first=$?
set -e
cat "$work/boot1.out"
# The reset ends the VM without a command exit status: v4l2-vm says 125.
if [ "$first" -ne 125 ] || ! grep -q "record exit 0" "$work/boot1.out"; then
  echo "power-cut-test: the first boot did not record and reset (v4l2-vm exit $first):" >&2
  tail -20 "$work/boot1.err" >&2
  exit 2
fi
frames=$(python3 -c 'import json,sys
for line in open(sys.argv[1]):
    event = json.loads(line)
    if event.get("event") == "recordingFinished": print(event["frames"])' "$work/record.json")
echo "the command reported $frames frames, then the power was cut"

# Second boot: mount (journal replay), list, probe.
"$vm" --timeout 300 --quiet -- bash -c "
  modprobe loop && modprobe ext4 && mkdir -p /mnt/x && mount -o loop '$image' /mnt/x || exit 3
  ls -la /mnt/x
  ffprobe -v error -count_frames -select_streams v:0 -show_entries format=duration:stream=nb_read_frames -of json /mnt/x/clip.mp4 \
    > '$PWD/$work/probe.json' 2> '$PWD/$work/probe.err'
  echo \"ffprobe exit \$?\"
  umount /mnt/x" | tee "$work/boot2.out"

python3 - "$work" "$frames" <<'PY'
import json, re, sys
work, frames = sys.argv[1], int(sys.argv[2])
listing = open(f"{work}/boot2.out").read()
problems = []
if "ffprobe exit 0" not in listing:
    problems.append("clip.mp4 does not play: " + open(f"{work}/probe.err").read().strip()[:300])
else:
    probe = json.load(open(f"{work}/probe.json"))
    duration = float(probe["format"].get("duration", 0))
    read = int(probe["streams"][0].get("nb_read_frames", 0))
    print(f"after the power cut: clip.mp4 {duration:.2f} s, {read} of {frames} frames")
    if duration < 2.8: problems.append(f"clip.mp4 lasts {duration:.2f} s, not ~3 s")
    if read != frames: problems.append(f"clip.mp4 has {read} frames; the command reported {frames}")
for leftover in [".clip.mp4.gcapture-recovery.mkv", ".clip.mp4.remuxing.mp4"]:
    if re.search(re.escape(leftover) + r"$", listing, re.M): problems.append(f"{leftover} is left")
for problem in problems: print("power-cut-test: FAIL:", problem, file=sys.stderr)
sys.exit(1 if problems else 0)
PY
echo "power-cut-test: the finished movie survived the power cut"
