"""A WHEP viewer for the WebRTC tests: watches a WHEP endpoint (RFC 9725) the way a browser would, with aiortc.

Usage: whep_client.py --url URL [--token TOKEN] [--origin ORIGIN] [--seconds S] [--video-only] [--codec vp8]
POSTs an SDP offer (recvonly video, and recvonly audio unless --video-only) to URL, applies the 201's SDP answer,
decodes what arrives for S seconds from the first video frame, DELETEs the session (the Location) and prints one
JSON line: {"status", "location", "videoFrames", "audioFrames", "width", "height", "deleteStatus",
"answerHasCandidates", "videoCodec", "seconds"}, with "error" when it fails.
Exits 0 on success; 2 when the POST fails or is not a 201 (no WebRTC then); 3 on a timeout; 1 on anything else.
Runs in the venv that scripts/install-deps.sh makes (aiortc from PyPI).
"""
import argparse
import asyncio
import json
import re
import sys
import urllib.parse

from aiortc import RTCConfiguration, RTCPeerConnection, RTCRtpReceiver, RTCSessionDescription
from aiortc.mediastreams import MediaStreamError

from local_http import HTTP_TIMEOUT, http_request


async def request(method, url, headers, body=None):
    """http_request() in a thread, under a deadline of its own."""
    call = asyncio.get_running_loop().run_in_executor(None, http_request, method, url, headers, body)
    return await asyncio.wait_for(call, HTTP_TIMEOUT + 2)


def video_codec(sdp):
    """The codec of the answer's first video payload type (the one the sender uses)."""
    section = re.search(r"^m=video \S+ \S+ (\d+).*?(?=^m=|\Z)", sdp, re.M | re.S)
    if not section:
        return None
    rtpmap = re.search(rf"^a=rtpmap:{section.group(1)} ([^/\s]+)", section.group(0), re.M)
    return rtpmap.group(1) if rtpmap else None


async def watch(args, result):
    """Returns the exit status; fills in result as it goes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + args.seconds + 20

    def remaining():
        return max(deadline - loop.time(), 0.1)

    headers = {"Content-Type": "application/sdp"}
    if args.token:
        headers["Authorization"] = f"Bearer {args.token}"
    if args.origin:
        headers["Origin"] = args.origin

    # Host candidates only: aiortc's default STUN server (Google's) is out of reach, and not needed on one machine.
    pc = RTCPeerConnection(RTCConfiguration(iceServers=[]))
    video = pc.addTransceiver("video", direction="recvonly")
    if args.codec:
        # Offer only this codec, as a browser without H.264 (Firefox without OpenH264) offers only VP8.
        video.setCodecPreferences([codec for codec in RTCRtpReceiver.getCapabilities("video").codecs
                                   if codec.mimeType.lower() in (f"video/{args.codec}", "video/rtx")])
    if not args.video_only:
        pc.addTransceiver("audio", direction="recvonly")
    woken = asyncio.Event()  # the first video frame, or the connection failing
    consumers = []

    async def consume(track):
        try:
            while True:
                frame = await track.recv()  # decoded: av.VideoFrame or av.AudioFrame
                result[f"{track.kind}Frames"] += 1
                if track.kind == "video" and result["width"] is None:
                    result["width"], result["height"] = frame.width, frame.height
                    result["firstVideo"] = loop.time()
                    woken.set()
        except MediaStreamError:
            pass

    @pc.on("track")
    def on_track(track):
        consumers.append(asyncio.ensure_future(consume(track)))

    @pc.on("connectionstatechange")
    def on_state():
        if pc.connectionState == "failed":
            woken.set()

    location = None
    try:
        # aiortc finishes gathering ICE candidates inside setLocalDescription: the offer carries them all.
        offer = await asyncio.wait_for(pc.createOffer(), remaining())
        await asyncio.wait_for(pc.setLocalDescription(offer), remaining())
        try:
            status, reply, body = await request("POST", args.url, headers, pc.localDescription.sdp.encode())
        except (OSError, asyncio.TimeoutError) as error:
            result["error"] = f"POST {args.url}: {getattr(error, 'reason', error) or 'timed out'}"
            return 2
        result["status"], result["location"] = status, reply.get("Location")
        if status != 201:
            result["error"] = body
            return 2
        if result["location"]:
            location = urllib.parse.urljoin(args.url, result["location"])
        result["answerHasCandidates"] = "a=candidate:" in body
        result["videoCodec"] = video_codec(body)
        await asyncio.wait_for(pc.setRemoteDescription(RTCSessionDescription(body, "answer")), remaining())
        await asyncio.wait_for(woken.wait(), remaining())
        if pc.connectionState == "failed":
            result["error"] = "the WebRTC connection failed"
            return 3
        await asyncio.sleep(args.seconds)
        return 0
    except asyncio.TimeoutError:
        result["error"] = f"no video frame within {args.seconds + 20:g} s (connection {pc.connectionState})"
        return 3
    except Exception as error:  # noqa: BLE001 - reported as JSON like every other outcome
        result["error"] = f"{type(error).__name__}: {error}"
        return 1
    finally:
        if "firstVideo" in result:
            result["seconds"] = round(loop.time() - result.pop("firstVideo"), 3)
        for consumer in consumers:  # the counts stop here
            consumer.cancel()
        if location:
            auth = {name: value for name, value in headers.items() if name != "Content-Type"}
            try:
                result["deleteStatus"] = (await request("DELETE", location, auth))[0]
            except (OSError, asyncio.TimeoutError) as error:
                result["deleteError"] = str(getattr(error, "reason", error) or "timed out")
        try:
            await asyncio.wait_for(pc.close(), 5)
        except asyncio.TimeoutError:
            pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the WHEP endpoint, http://127.0.0.1:PORT/whep")
    parser.add_argument("--token", help="sent as Authorization: Bearer TOKEN")
    parser.add_argument("--origin", help="sent as the Origin header")
    parser.add_argument("--seconds", type=float, default=5, help="how long to receive from the first video frame")
    parser.add_argument("--video-only", action="store_true", help="no audio transceiver")
    parser.add_argument("--codec", choices=["vp8", "h264"], help="offer only this video codec")
    args = parser.parse_args()
    result = {"status": None, "location": None, "videoFrames": 0, "audioFrames": 0, "width": None, "height": None,
              "deleteStatus": None, "answerHasCandidates": False, "videoCodec": None, "seconds": 0.0}
    code = asyncio.run(watch(args, result))
    print(json.dumps(result), flush=True)
    sys.exit(code)


if __name__ == "__main__":
    main()
