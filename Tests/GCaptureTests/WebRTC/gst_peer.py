"""WebRTC test peers on GStreamer's webrtcbin, for the WHEP load tests and the WHIP publishing tests.

Usage:
  gst_peer.py whep-viewers --url URL --seconds S --count N [--token T] [--concurrent-posts]
  gst_peer.py whip-receiver --port P --output FILE.mkv [--token T]

whep-viewers: N viewers in one process (one GLib main loop, one pipeline each) that each POST a non-trickle
offer (one recvonly H.264 video transceiver; one POST at a time unless --concurrent-posts) to the WHEP endpoint
URL, apply the 201's answer and count the depayloaded H.264 access units they receive, without decoding, so
that the viewers cost little CPU. It counts for S seconds from the moment every viewer has its first frame,
DELETEs every session (the Location) and prints one JSON line: {"viewers", "frames" (per viewer, counted in
those S seconds), "statuses", "deleteStatuses", "seconds", "windowStart", "windowEnd" (Unix time of the
counting's start and end, to line up with samples taken outside)}, with "error" when it fails. Exits 0; 2
when a POST fails or is not a 201; 3 when a viewer got no frame within S + 30 s or lost its connection; 1
otherwise.

whip-receiver: a WHIP endpoint (RFC 9725) on 127.0.0.1:P that a publisher pushes to. It answers a POST to /whip...
(recvonly, H.264 video and Opus audio; 401 without the token, 404 off /whip) and records what arrives, without
re-encoding, into a streamable Matroska file that stays readable if the receiver is SIGKILLed. One publisher at
a time: a new POST replaces the live session (a publisher that reconnects must get in). Session 1 records to
FILE, session k > 1 to FILE-k.mkv. DELETE /whip/<id> ends the session (the file is finalized). SIGTERM/SIGINT
finalizes and exits 0. It prints JSON lines: {"event": "listening", "port"} at start, {"event": "session",
"id", "output"} when a publisher is answered, {"event": "ended", "id"} once its file is finalized, {"event":
"error", "id", "error"} on a pipeline error, and at exit
{"sessions", "videoFrames", "audioFrames", "output", "outputs"} (the frame counts: buffers that went to the muxer).

Runs on Debian's /usr/bin/python3 with python3-gi (GStreamer 1.22, gstreamer1.0-nice); stdlib + gi only.
"""
import argparse
import contextlib
import hmac
import http.server
import json
import os
import re
import signal
import sys
import threading
import time
import urllib.parse
import uuid

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstWebRTC", "1.0")
gi.require_version("GstSdp", "1.0")
from gi.repository import GLib, Gst, GstSdp, GstWebRTC  # noqa: E402

from local_http import HTTP_TIMEOUT, http_request  # noqa: E402

VIEWER_CAPS = ("application/x-rtp,media=video,encoding-name=H264,payload=102,clock-rate=90000,"
               "packetization-mode=(string)1,profile-level-id=(string)42e01f")
# What the WHIP receiver accepts: any H.264 and Opus payload the offer has (the answer keeps only those).
RECEIVER_VIDEO_CAPS = "application/x-rtp,media=video,encoding-name=H264,clock-rate=90000"
RECEIVER_AUDIO_CAPS = "application/x-rtp,media=audio,encoding-name=OPUS,clock-rate=48000"
GATHERING_TIMEOUT = 5
FINALIZE_TIMEOUT = 5
# A muxer pad whose stream has not appeared this long after the first one is given up (released), so that the
# muxer, which waits for every pad before writing its header, records the streams that do arrive.
LATE_STREAM_TIMEOUT = 3
PRINT_LOCK = threading.Lock()


def emit(obj):
    """One JSON line on stdout, flushed at once: tests wait on these lines."""
    with PRINT_LOCK:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()


def leave(code):
    """Exits without the interpreter's teardown, which can hang on GStreamer's own threads."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def in_thread(fn, *args):
    """Runs a blocking call (HTTP) off the main loop."""
    thread = threading.Thread(target=fn, args=args, daemon=True)
    thread.start()
    return thread


def on_main(fn, *args):
    """Runs fn(*args) once on the main loop's thread: webrtcbin and pipeline calls are all made from there."""
    def run():
        fn(*args)
        return GLib.SOURCE_REMOVE
    GLib.idle_add(run)


def promise(field, then):
    """A Gst.Promise whose reply is handed to then(sdp_text, error) on the main loop; field=None for no value.

    The reply's description is turned into text here, in the callback, while `reply` is referenced: gi hands
    out the reply structure as a copy and its values uncopied, so a value outliving either crashes.
    """
    def changed(p):
        value, error = None, None
        result = p.wait()  # already answered: this does not block
        reply = p.get_reply()
        if result != Gst.PromiseResult.REPLIED:
            error = f"promise {result.value_nick}"
        elif reply is not None and reply.has_field("error"):
            try:
                error = reply.get_value("error").message
            except Exception:  # noqa: BLE001 - older gi cannot always convert a GError
                error = reply.to_string()
        elif field:
            value = reply.get_value(field) if reply is not None else None
            if value is None:
                error = f"no {field} in the reply"
            else:
                value = value.sdp.as_text()
        on_main(then, value, error)
    return Gst.Promise.new_with_change_func(changed)


def description(kind, text):
    """A GstWebRTC session description from SDP text, or None when it does not parse."""
    result, message = GstSdp.SDPMessage.new_from_text(text)
    if result != GstSdp.SDPResult.OK:
        return None
    return GstWebRTC.WebRTCSessionDescription.new(kind, message)


def make(factory, **properties):
    element = Gst.ElementFactory.make(factory, None)
    if element is None:
        raise RuntimeError(f"no GStreamer element {factory}")
    for name, value in properties.items():
        element.set_property(name.rstrip("_").replace("_", "-"), value)  # async_ -> async
    return element


def webrtcbin():
    """A webrtcbin for one peer: one transport for everything (max-bundle), host candidates only (no STUN)."""
    return make("webrtcbin", bundle_policy=GstWebRTC.WebRTCBundlePolicy.MAX_BUNDLE)


def gathering_complete(webrtc):
    return webrtc.get_property("ice-gathering-state") == GstWebRTC.WebRTCICEGatheringState.COMPLETE


# ---------------------------------------------------------------------------------------------------- WHEP viewers

class Viewer:
    """One WHEP session: its own pipeline with a webrtcbin, receiving into rtph264depay ! fakesink."""

    def __init__(self, run, index):
        self.run, self.index = run, index
        self.frames = 0
        self.status = None
        self.location = None
        self.posted = False
        self.poster = None  # the thread POSTing the offer
        self.pipeline = Gst.Pipeline.new(f"viewer{index}")
        self.webrtc = webrtcbin()
        self.pipeline.add(self.webrtc)
        self.webrtc.emit("add-transceiver", GstWebRTC.WebRTCRTPTransceiverDirection.RECVONLY,
                         Gst.Caps.from_string(VIEWER_CAPS))
        self.webrtc.connect("pad-added", self.on_pad)
        self.webrtc.connect("notify::ice-gathering-state", lambda *_: on_main(self.maybe_post))
        self.webrtc.connect("notify::ice-connection-state", lambda *_: on_main(self.check_connection))
        bus = self.pipeline.get_bus()
        bus.add_signal_watch()
        bus.connect("message::error", self.on_error)

    def fail(self, code, message):
        self.run.fail(code, f"viewer {self.index}: {message}")

    def on_error(self, _bus, message):
        error, _debug = message.parse_error()
        self.fail(1, f"{message.src.get_name()}: {error.message}")

    def check_connection(self):
        if self.webrtc.get_property("ice-connection-state") == GstWebRTC.WebRTCICEConnectionState.FAILED:
            self.fail(3, "the ICE connection failed")

    def start(self):
        if self.pipeline.set_state(Gst.State.PLAYING) == Gst.StateChangeReturn.FAILURE:
            self.fail(1, "the pipeline does not start")
            return
        self.webrtc.emit("create-offer", None, promise("offer", self.on_offer))

    def on_offer(self, offer, error):
        if error:
            self.fail(1, f"create-offer: {error}")
            return
        offer = description(GstWebRTC.WebRTCSDPType.OFFER, offer)
        self.webrtc.emit("set-local-description", offer, promise(None, self.on_local_set))

    def on_local_set(self, _value, error):
        if error:
            self.fail(1, f"set-local-description: {error}")
            return
        # Non-trickle: the offer goes out once every candidate is in it.
        GLib.timeout_add_seconds(GATHERING_TIMEOUT, self.gathering_timed_out)
        self.maybe_post()

    def gathering_timed_out(self):
        if not self.posted:
            self.fail(1, f"ICE gathering not complete after {GATHERING_TIMEOUT} s")
        return GLib.SOURCE_REMOVE

    def maybe_post(self):
        local = self.webrtc.get_property("local-description")
        if self.posted or local is None or not gathering_complete(self.webrtc):
            return
        self.posted = True
        headers = {"Content-Type": "application/sdp", **self.run.auth}
        self.poster = in_thread(self.post, headers, local.sdp.as_text().encode())

    def post(self, headers, body):  # in its own thread
        try:
            with self.run.post_lock:
                status, reply, answer = http_request("POST", self.run.url, headers, body)
        except OSError as error:
            on_main(self.fail, 2, f"POST {self.run.url}: {getattr(error, 'reason', error) or 'timed out'}")
            return
        # Kept here, not on the main loop: a session answered while the run is already ending is DELETEd too.
        self.status = status
        if reply.get("Location"):
            self.location = urllib.parse.urljoin(self.run.url, reply["Location"])
        on_main(self.on_answer, status, answer)

    def on_answer(self, status, body):
        if status != 201:
            self.fail(2, f"POST answered {status}: {body.strip()[:300]}")
            return
        if not self.location:
            self.fail(2, "the 201 has no Location")
            return
        answer = description(GstWebRTC.WebRTCSDPType.ANSWER, body)
        if answer is None:
            self.fail(2, "the answer is not SDP")
            return
        self.webrtc.emit("set-remote-description", answer, promise(None, self.on_remote_set))

    def on_remote_set(self, _value, error):
        if error:
            self.fail(1, f"set-remote-description: {error}")

    def on_pad(self, _webrtc, pad):  # on a streaming thread
        if pad.get_direction() != Gst.PadDirection.SRC:
            return
        # Depayload only, no decoding: the frame count is all that is wanted, and viewers must stay cheap.
        depay = make("rtph264depay")
        sink = make("fakesink", sync=False, async_=False, enable_last_sample=False)
        self.pipeline.add(depay)
        self.pipeline.add(sink)
        depay.link(sink)
        depay.get_static_pad("src").add_probe(Gst.PadProbeType.BUFFER, self.on_frame)
        sink.sync_state_with_parent()
        depay.sync_state_with_parent()
        pad.link(depay.get_static_pad("sink"))

    def on_frame(self, _pad, _info):  # on a streaming thread; rtph264depay outputs whole access units
        self.frames += 1
        if self.frames == 1:
            on_main(self.run.first_frame)
        return Gst.PadProbeReturn.OK

    def delete(self, results):  # in its own thread
        try:
            results[self.index] = http_request("DELETE", self.location, dict(self.run.auth))[0]
        except OSError:
            results[self.index] = None


class ViewerRun:
    def __init__(self, args):
        self.url, self.seconds, self.count = args.url, args.seconds, args.count
        self.auth = {"Authorization": f"Bearer {args.token}"} if args.token else {}
        # One POST at a time unless --concurrent-posts: offers racing each other are another test than N viewers.
        self.post_lock = threading.Lock() if not args.concurrent_posts else contextlib.nullcontext()
        self.loop = GLib.MainLoop()
        self.viewers = []
        self.code, self.error = 0, None
        self.started_at = None  # when every viewer had its first frame
        self.baseline = None
        self.window = [None, None]  # wall clock (Unix seconds) of the counting's start and end
        self.frames = None
        self.measured = 0.0

    def fail(self, code, message):
        if self.error is None:  # the first failure is the one worth reporting
            self.code, self.error = code, message
        self.loop.quit()

    def first_frame(self):
        if self.started_at is not None or not all(viewer.frames for viewer in self.viewers):
            return
        self.started_at = time.monotonic()
        self.window = [time.time(), None]
        self.baseline = [viewer.frames for viewer in self.viewers]
        GLib.timeout_add(int(self.seconds * 1000), self.measured_enough)

    def measured_enough(self):
        self.measured = time.monotonic() - self.started_at
        self.window[1] = time.time()
        self.frames = [viewer.frames - base for viewer, base in zip(self.viewers, self.baseline)]
        self.loop.quit()
        return GLib.SOURCE_REMOVE

    def timed_out(self):
        waiting = [viewer.index for viewer in self.viewers if not viewer.frames]
        self.fail(3, f"no video frame within {self.seconds + 30:g} s for viewers {waiting}" if waiting
                  else f"not done within {self.seconds + 30:g} s")
        return GLib.SOURCE_REMOVE

    def execute(self):
        try:
            self.viewers = [Viewer(self, index) for index in range(self.count)]
        except RuntimeError as error:
            self.fail(1, str(error))
            return self.report()
        GLib.timeout_add(int((self.seconds + 30) * 1000), self.timed_out)
        for viewer in self.viewers:
            on_main(viewer.start)
        self.loop.run()
        return self.report()

    def report(self):
        if self.frames is None:  # stopped early: the counts so far
            self.frames = [viewer.frames for viewer in self.viewers]
            if self.started_at is not None:
                self.measured = time.monotonic() - self.started_at
        if self.error is None and not all(self.frames):
            self.code, self.error = 3, "a viewer got no frame"
        limit = time.monotonic() + HTTP_TIMEOUT + 2
        for viewer in self.viewers:  # POSTs still under way: their sessions must be DELETEd as well
            if viewer.poster:
                viewer.poster.join(max(limit - time.monotonic(), 0))
        deletes = [None] * len(self.viewers)
        threads = [in_thread(viewer.delete, deletes) for viewer in self.viewers if viewer.location]
        limit = time.monotonic() + HTTP_TIMEOUT + 2
        for thread in threads:
            thread.join(max(limit - time.monotonic(), 0))
        stop_pipelines([viewer.pipeline for viewer in self.viewers])
        result = {"viewers": self.count, "frames": self.frames, "statuses": [v.status for v in self.viewers],
                  "deleteStatuses": deletes, "seconds": round(self.measured, 3),
                  "windowStart": self.window[0], "windowEnd": self.window[1]}
        if self.error:
            result["error"] = self.error
        print(json.dumps(result), flush=True)
        return self.code


def stop_pipelines(pipelines, timeout=FINALIZE_TIMEOUT):
    """Sets the pipelines to NULL in a thread, under a deadline: a stuck state change must not hang the run."""
    thread = in_thread(lambda: [pipeline.set_state(Gst.State.NULL) for pipeline in pipelines])
    thread.join(timeout)


# --------------------------------------------------------------------------------------------------- WHIP receiver

def offered_kinds(sdp):
    """The media kinds ("video", "audio") that the offer sends with a codec we record (H.264, Opus)."""
    kinds = set()
    for section in re.split(r"\r?\n(?=m=)", sdp)[1:]:
        kind = section[2:].split(" ", 1)[0]
        codecs = {name.upper() for name in re.findall(r"^a=rtpmap:\d+ ([^/\s]+)", section, re.M)}
        # Port 0 rejects the media, except with bundle-only: webrtcbin's max-bundle offers give every m-line
        # but the first port 0 and a=bundle-only.
        rejected = re.match(r"m=\S+ 0 ", section) and not re.search(r"^a=bundle-only", section, re.M)
        if rejected or re.search(r"^a=(recvonly|inactive)\s*$", section, re.M):
            continue
        if (kind == "video" and "H264" in codecs) or (kind == "audio" and "OPUS" in codecs):
            kinds.add(kind)
    return kinds


class Session:
    """One publisher: a webrtcbin and a Matroska recording, in a pipeline of its own."""

    def __init__(self, receiver, sid, offer_text, output):
        self.receiver, self.id, self.output = receiver, sid, output
        self.answer = None  # the answer SDP text once ready
        self.error = None
        self.ready = threading.Event()  # answer or error
        self.ended = threading.Event()  # file finalized and pipeline stopped
        self.closing = False
        self.announced = False  # answered 201 and told on stdout
        self.done_callbacks = []
        self.chains = []  # the depayloaders of the streams linked to the muxer
        self.pads_lock = threading.Lock()  # webrtcbin's pads appear on streaming threads; releases happen on main
        self.offer = description(GstWebRTC.WebRTCSDPType.OFFER, offer_text)
        self.kinds = offered_kinds(offer_text)
        self.pipeline = Gst.Pipeline.new(f"session-{sid}")
        self.webrtc = webrtcbin()
        # The jitterbuffer's default (slave) mode re-times the burst a publisher sends once DTLS is up (what it
        # queued meanwhile): squeezed timestamps, then none at all, and matroskamux drops those buffers ("Invalid
        # buffer timestamp"). Mode none keeps the sender's RTP timestamps, which is what a recording wants.
        rtpbin = self.webrtc.get_by_name("rtpbin")
        if rtpbin is not None:
            rtpbin.set_property("buffer-mode", 0)
        # streamable: no seek back to fix sizes and cues, so what is on disk is readable at any time (SIGKILL).
        self.mux = make("matroskamux", streamable=True)
        # Unbuffered: whatever the muxer wrote is in the file even if the process is killed.
        self.sink = make("filesink", location=output, buffer_mode=2, sync=False, async_=False)
        for element in (self.webrtc, self.mux, self.sink):
            self.pipeline.add(element)
        self.mux.link(self.sink)
        self.sink.get_static_pad("sink").add_probe(Gst.PadProbeType.EVENT_DOWNSTREAM, self.on_sink_event)
        # The muxer writes its header once every pad has data, and a pad added later is refused ("Caps on pad
        # arrived late"): ask for the pads of every offered stream now, and link them as webrtcbin's pads appear.
        self.mux_pads = {}
        for kind in sorted(self.kinds):
            pad = self.mux.request_pad_simple("video_%u" if kind == "video" else "audio_%u")
            pad.add_probe(Gst.PadProbeType.BUFFER, self.count_video if kind == "video" else self.count_audio)
            self.mux_pads[kind] = pad
            # Answer with H.264 / Opus only: a transceiver's codec-preferences filter the answer's payloads.
            caps = RECEIVER_VIDEO_CAPS if kind == "video" else RECEIVER_AUDIO_CAPS
            self.webrtc.emit("add-transceiver", GstWebRTC.WebRTCRTPTransceiverDirection.RECVONLY,
                             Gst.Caps.from_string(caps))
        self.webrtc.connect("pad-added", self.on_pad)
        self.webrtc.connect("notify::ice-gathering-state", lambda *_: on_main(self.maybe_answer))
        bus = self.pipeline.get_bus()
        bus.add_signal_watch()
        bus.connect("message::error", self.on_error)

    # -- negotiation (main loop)

    def start(self):
        if self.pipeline.set_state(Gst.State.PLAYING) == Gst.StateChangeReturn.FAILURE:
            self.refuse("the pipeline does not start")
            return
        self.webrtc.emit("set-remote-description", self.offer, promise(None, self.on_remote_set))

    def refuse(self, message):
        if not self.ready.is_set():
            self.error = message
            self.ready.set()

    def on_remote_set(self, _value, error):
        if error:
            self.refuse(f"set-remote-description: {error}")
            return
        self.webrtc.emit("create-answer", None, promise("answer", self.on_answer))

    def on_answer(self, answer, error):
        if error:
            self.refuse(f"create-answer: {error}")
            return
        answer = description(GstWebRTC.WebRTCSDPType.ANSWER, answer)
        self.webrtc.emit("set-local-description", answer, promise(None, self.on_local_set))

    def on_local_set(self, _value, error):
        if error:
            self.refuse(f"set-local-description: {error}")
            return
        GLib.timeout_add_seconds(GATHERING_TIMEOUT, self.gathering_timed_out)
        self.maybe_answer()

    def gathering_timed_out(self):
        self.refuse(f"ICE gathering not complete after {GATHERING_TIMEOUT} s")
        return GLib.SOURCE_REMOVE

    def maybe_answer(self):
        local = self.webrtc.get_property("local-description")
        if self.ready.is_set() or local is None or not gathering_complete(self.webrtc):
            return
        self.answer = local.sdp.as_text()
        self.ready.set()

    def on_error(self, _bus, message):
        error, _debug = message.parse_error()
        if not self.closing:
            emit({"event": "error", "id": self.id, "error": f"{message.src.get_name()}: {error.message}"})
        self.refuse(error.message)

    # -- media (streaming threads)

    def on_pad(self, _webrtc, pad):
        if pad.get_direction() != Gst.PadDirection.SRC:
            return
        caps = pad.get_current_caps() or pad.query_caps(None)
        name = caps.get_structure(0).get_string("encoding-name") if caps and caps.get_size() else None
        kind = {"H264": "video", "OPUS": "audio"}.get((name or "").upper())
        with self.pads_lock:
            mux_pad = self.mux_pads.get(kind)
            if mux_pad is None or mux_pad.is_linked():
                elements = [make("fakesink", sync=False, async_=False)]  # nothing to record: swallow it
            elif kind == "video":
                elements = [make("rtph264depay"), make("h264parse"), self.queue()]
            else:
                elements = [make("rtpopusdepay"), make("opusparse"), self.queue()]
            for element in elements:
                self.pipeline.add(element)
            for upstream, downstream in zip(elements, elements[1:]):
                upstream.link(downstream)
            if len(elements) > 1:
                elements[-1].get_static_pad("src").link(mux_pad)
                self.chains.append(elements[0])
        for element in reversed(elements):
            element.sync_state_with_parent()
        # Once the session is closing, nothing more goes in behind the EOS.
        pad.add_probe(Gst.PadProbeType.BUFFER, lambda *_: Gst.PadProbeReturn.DROP if self.closing
                      else Gst.PadProbeReturn.OK)
        pad.link(elements[0].get_static_pad("sink"))
        if len(elements) > 1:
            on_main(self.stream_started)

    @staticmethod
    def queue():
        # Room for the wait until every muxer pad has data (the muxer holds back until then).
        return make("queue", max_size_buffers=0, max_size_bytes=0, max_size_time=10 * Gst.SECOND)

    def stream_started(self):
        if len(self.chains) == 1 and len(self.mux_pads) > 1:
            GLib.timeout_add_seconds(LATE_STREAM_TIMEOUT, self.give_up_missing_streams)

    def give_up_missing_streams(self):
        if not self.closing:
            self.release_unlinked_pads()
        return GLib.SOURCE_REMOVE

    def release_unlinked_pads(self):
        with self.pads_lock:
            for kind, pad in list(self.mux_pads.items()):
                if not pad.is_linked():
                    self.mux.release_request_pad(pad)
                    del self.mux_pads[kind]

    def count_video(self, _pad, _info):
        self.receiver.video_frames += 1
        return Gst.PadProbeReturn.OK

    def count_audio(self, _pad, _info):
        self.receiver.audio_frames += 1
        return Gst.PadProbeReturn.OK

    # -- ending (main loop)

    def finish(self, then=None):
        """EOS into the recording so the muxer writes its last cluster, then stop; then() once ended."""
        if then:
            if self.ended.is_set():
                then()
                return
            self.done_callbacks.append(then)
        if self.closing:
            return
        self.closing = True
        self.release_unlinked_pads()
        if not self.chains:
            self.stop()
            return
        for depay in self.chains:
            depay.get_static_pad("sink").send_event(Gst.Event.new_eos())
        GLib.timeout_add_seconds(FINALIZE_TIMEOUT, self.stop)

    def on_sink_event(self, _pad, info):  # on a streaming thread
        if info.get_event().type == Gst.EventType.EOS:
            on_main(self.stop)
        return Gst.PadProbeReturn.OK

    def stop(self):
        if self.ended.is_set():
            return GLib.SOURCE_REMOVE
        self.closing = True
        stop_pipelines([self.pipeline])
        self.ended.set()
        self.refuse("the session ended")
        if self.announced:
            emit({"event": "ended", "id": self.id})
        callbacks, self.done_callbacks = self.done_callbacks, []
        for callback in callbacks:
            callback()
        return GLib.SOURCE_REMOVE


class Receiver:
    def __init__(self, args):
        self.port, self.output, self.token = args.port, args.output, args.token
        self.loop = GLib.MainLoop()
        self.session = None
        self.sessions = 0
        self.outputs = []
        self.video_frames = 0
        self.audio_frames = 0
        self.lock = threading.Lock()  # one POST or DELETE at a time
        self.server = None

    def output_for(self, number):
        if number == 1:
            return self.output
        root, ext = os.path.splitext(self.output)
        return f"{root}-{number}{ext or '.mkv'}"

    def authorized(self, header):
        return not self.token or hmac.compare_digest((header or "").encode(), f"Bearer {self.token}".encode())

    def end_session(self):
        """Finalizes the live session, if any; called off the main loop, waits at most FINALIZE_TIMEOUT + 1 s."""
        session = self.session
        if session is None:
            return
        on_main(session.finish)
        session.ended.wait(FINALIZE_TIMEOUT + 1)
        self.session = None

    def publish(self, offer):
        """(status, headers, body) for a POSTed offer; called on an HTTP thread."""
        if description(GstWebRTC.WebRTCSDPType.OFFER, offer) is None or not offered_kinds(offer):
            return 400, {}, "the offer is not SDP that sends H.264 video or Opus audio"
        with self.lock:
            self.end_session()  # a reconnecting publisher replaces the old session
            sid = uuid.uuid4().hex
            output = self.output_for(len(self.outputs) + 1)
            created = threading.Event()
            holder = {}

            def create():
                try:
                    holder["session"] = Session(self, sid, offer, output)
                    holder["session"].start()
                except RuntimeError as error:
                    holder["error"] = str(error)
                created.set()
            on_main(create)
            if not created.wait(HTTP_TIMEOUT) or "error" in holder:
                return 500, {}, holder.get("error", "the session was not created in time")
            session = holder["session"]
            if not session.ready.wait(GATHERING_TIMEOUT + HTTP_TIMEOUT) or session.answer is None:
                on_main(session.finish)
                session.ended.wait(FINALIZE_TIMEOUT + 1)
                if os.path.exists(output) and os.path.getsize(output) == 0:  # the refused session's empty file
                    os.remove(output)
                return 400, {}, session.error or "no answer in time"
            session.announced = True
            self.session = session
            self.outputs.append(output)
            self.sessions = len(self.outputs)
            emit({"event": "session", "id": sid, "output": output})
            return 201, {"Content-Type": "application/sdp", "Location": f"/whip/{sid}"}, session.answer

    def delete(self, sid):
        with self.lock:
            if self.session is None or self.session.id != sid:
                return 404, {}, "no such session"
            self.end_session()
            return 200, {}, ""

    def shutdown(self):
        """SIGTERM/SIGINT: finalize the recording (at most FINALIZE_TIMEOUT s), then leave the loop."""
        GLib.timeout_add_seconds(FINALIZE_TIMEOUT + 1, lambda: self.loop.quit())
        if self.session is not None:
            self.session.finish(self.loop.quit)
        else:
            self.loop.quit()
        return GLib.SOURCE_REMOVE

    def execute(self):
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args):  # stdout is for the JSON lines, stderr stays quiet
                pass

            def reply(self, status, headers, body):
                data = body.encode() if isinstance(body, str) else body
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def checked(self):
                """True when the path and the token are right; otherwise answers and returns False."""
                path = urllib.parse.urlsplit(self.path).path
                if not path.startswith("/whip"):
                    self.reply(404, {}, "not found")
                    return False
                if not receiver.authorized(self.headers.get("Authorization")):
                    self.reply(401, {"WWW-Authenticate": "Bearer"}, "unauthorized")
                    return False
                return True

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode(errors="replace") if length else ""
                if not self.checked():
                    return
                if self.headers.get_content_type() != "application/sdp":
                    self.reply(415, {}, "the offer must be application/sdp")
                    return
                self.reply(*receiver.publish(body))

            def do_DELETE(self):
                if not self.checked():
                    return
                sid = urllib.parse.urlsplit(self.path).path.rstrip("/").rsplit("/", 1)[-1]
                self.reply(*receiver.delete(sid))

            def do_PATCH(self):  # no trickle ICE: the offer and the answer carry every candidate
                if self.checked():
                    self.reply(405, {"Allow": "POST, DELETE"}, "no trickle ICE")

            do_GET = do_PUT = do_PATCH

        try:
            self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        except OSError as error:
            emit({"error": f"cannot listen on 127.0.0.1:{self.port}: {error.strerror or error}"})
            return 1
        self.server.daemon_threads = True
        in_thread(self.server.serve_forever, 0.2)
        for signum in (signal.SIGTERM, signal.SIGINT):
            GLib.unix_signal_add(GLib.PRIORITY_HIGH, signum, self.shutdown)
        emit({"event": "listening", "port": self.server.server_address[1]})
        self.loop.run()
        self.server.shutdown()
        emit({"sessions": self.sessions, "videoFrames": self.video_frames, "audioFrames": self.audio_frames,
              "output": self.output, "outputs": self.outputs})
        return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    viewers = commands.add_parser("whep-viewers", help="N WHEP viewers counting H.264 frames")
    viewers.add_argument("--url", required=True, help="the WHEP endpoint, http://127.0.0.1:PORT/whep")
    viewers.add_argument("--seconds", type=float, required=True, help="how long to count, from all first frames")
    viewers.add_argument("--count", type=int, required=True, help="how many viewers")
    viewers.add_argument("--token", help="sent as Authorization: Bearer TOKEN")
    viewers.add_argument("--concurrent-posts", action="store_true", help="POST all the offers at once")
    receiver = commands.add_parser("whip-receiver", help="a WHIP endpoint recording to Matroska")
    receiver.add_argument("--port", type=int, required=True, help="listens on 127.0.0.1:PORT")
    receiver.add_argument("--output", required=True, help="the Matroska file of the first session")
    receiver.add_argument("--token", help="required as Authorization: Bearer TOKEN")
    args = parser.parse_args()
    Gst.init(None)
    if args.command == "whep-viewers":
        if args.count < 1 or args.seconds <= 0:
            print(json.dumps({"error": "--count must be >= 1 and --seconds > 0"}), flush=True)
            leave(1)
        leave(ViewerRun(args).execute())
    else:
        leave(Receiver(args).execute())


if __name__ == "__main__":
    main()
