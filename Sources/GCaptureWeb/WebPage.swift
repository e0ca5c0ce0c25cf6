/// The operator's page: HTML, style and script served from this module (no files to install, nothing
/// fetched from elsewhere: the Content-Security-Policy allows this server only).
enum WebPage {
    static let contentSecurityPolicy = "default-src 'self'; img-src 'self' data:; media-src 'self'; frame-ancestors 'none'; form-action 'self'"

    static let html = """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>gcapture</title>
        <link rel="stylesheet" href="/app.css">
        </head>
        <body>
        <header><h1>gcapture</h1><span id="status">connecting…</span></header>
        <main>
          <section id="view">
            <div id="cameras" role="group" aria-label="cameras: pick the one the shutter and a new recording use" hidden></div>
            <div id="picture">
            <video id="live-video" autoplay muted playsinline hidden aria-label="the camera's live picture"></video>
            <img id="live" alt="the camera's live picture" hidden>
            <div id="no-signal" hidden>NO SIGNAL</div>
            <div id="areas" aria-hidden="true"></div>
            </div>
            <p id="live-mode" role="status"></p>
            <div id="banner" hidden></div>
            <div id="controls">
              <button id="shutter" type="button">Take photo</button>
              <button id="record" type="button">Record</button>
              <button id="pause" type="button" disabled>Pause</button>
              <button id="trigger" type="button" title="Record an event: a clip from the pre-roll before now to the post-roll after the last trigger">Trigger event</button>
              <select id="camera" aria-label="camera"></select>
              <button id="switch" type="button">Switch camera</button>
            </div>
            <p id="reply" role="status"></p>
            <ol id="events" aria-label="events"></ol>
          </section>
          <section>
            <h2>Gallery</h2>
            <div id="library-bar">
              <select id="filter-type" aria-label="show"><option value="all">Photos and videos</option><option value="photo">Photos</option><option value="video">Videos</option></select>
              <label><input type="checkbox" id="filter-favorites"> Favourites</label>
              <select id="filter-album" aria-label="album"><option value="">Every album</option></select>
              <button id="download" type="button" disabled>Download selected</button>
              <span id="count" role="status"></span>
            </div>
            <form id="zip-form" method="post" action="/api/library/zip" hidden><input type="hidden" name="items" id="zip-items"></form>
            <div id="gallery"></div>
            <button id="more" type="button" hidden>Show more</button>
          </section>
        </main>
        <script src="/app.js"></script>
        </body>
        </html>
        """

    static let css = """
        body { font: 15px system-ui, sans-serif; margin: 0; background: #111; color: #eee; }
        header { display: flex; gap: 1em; align-items: baseline; padding: .5em 1em; background: #222; }
        h1 { font-size: 1.2em; margin: 0; } h2 { font-size: 1.1em; }
        main { display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); gap: 1em; padding: 1em; }
        @media (max-width: 900px) { main { grid-template-columns: 1fr; } }
        #live, #live-video { width: 100%; background: #000; aspect-ratio: 16 / 9; object-fit: contain; display: block; }
        #live[hidden], #live-video[hidden] { display: none; }
        #no-signal { position: absolute; left: 0; top: 0; width: 100%; aspect-ratio: 16 / 9; display: flex; align-items: center;
                     justify-content: center; background: #222; color: #eee; font: bold 2em monospace; }
        #no-signal[hidden] { display: none; }
        #live-mode { font-size: 12px; color: #aaa; margin: .2em 0; }
        #picture { position: relative; }
        #cameras { display: grid; grid-template-columns: repeat(auto-fill, minmax(140px, 1fr)); gap: .4em; margin-bottom: .6em; }
        #cameras[hidden] { display: none; }
        #cameras button { padding: .2em; text-align: left; }
        #cameras button[aria-pressed="true"] { outline: 3px solid #8cf; }
        #cameras img { width: 100%; aspect-ratio: 16 / 9; object-fit: contain; background: #000; display: block; }
        #cameras .state { font-size: 12px; }
        #areas { position: absolute; left: 0; top: 0; pointer-events: none; }
        #areas .area { position: absolute; box-sizing: border-box; }
        #areas .zone { border: 2px dashed #4c4; }
        #areas .mask { background: rgba(0, 0, 0, .45); border: 1px solid #888; }
        #areas .motion { border: 2px solid #f44; }
        #banner { background: #a40; padding: .4em .8em; }
        #controls { display: flex; flex-wrap: wrap; gap: .5em; margin: .6em 0; }
        button, select { font: inherit; padding: .4em .8em; border-radius: 4px; border: 1px solid #555; background: #333; color: #eee; }
        button.recording { background: #b00; }
        #reply.error { color: #f88; }
        #events { font: 12px monospace; max-height: 10em; overflow-y: auto; padding-left: 1.5em; color: #aaa; }
        #gallery { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr)); gap: .6em; }
        #gallery figure { margin: 0; background: #222; padding: .3em; border-radius: 4px; }
        #gallery img { width: 100%; aspect-ratio: 4 / 3; object-fit: cover; display: block; }
        #gallery figcaption { font-size: 12px; word-break: break-all; }
        #gallery a { color: #8cf; }
        #gallery figure.event { outline: 2px solid #c80; }
        #gallery figure.timelapse { outline: 2px solid #08c; }
        #gallery figure.selected { outline: 3px solid #8cf; }
        #gallery .mark { display: flex; justify-content: space-between; align-items: center; }
        #gallery .favorite { border: 0; background: none; padding: 0 .2em; font-size: 18px; color: #777; }
        #gallery .favorite[aria-pressed="true"] { color: #fc3; }
        #library-bar { display: flex; flex-wrap: wrap; gap: .5em; align-items: center; margin-bottom: .6em; }
        #count { color: #aaa; font-size: 13px; }
        #more { margin-top: .6em; }
        """

    static let script = """
        "use strict";
        const $ = (id) => document.getElementById(id);
        let recording = null, paused = false;

        function say(text, failed) { $("reply").textContent = text; $("reply").className = failed ? "error" : ""; }

        async function command(request) {
          try {
            const response = await fetch("/api/command", { method: "POST", headers: { "Content-Type": "application/json" },
                                                           body: JSON.stringify(request) });
            const reply = await response.json();
            say(reply.ok ? "ok" + (reply.path ? ": " + reply.path : "") : reply.error, !reply.ok);
            return reply;
          } catch (error) { say("the server did not answer: " + error, true); return { ok: false }; }
        }

        function showRecording(path, isPaused) {
          recording = path; paused = !!isPaused;
          $("record").textContent = recording ? "Stop recording" : "Record";
          $("record").classList.toggle("recording", !!recording);
          $("pause").disabled = !recording;
          $("pause").textContent = paused ? "Resume" : "Pause";
        }

        // The motion output's zones and masks, and the motion seen now, drawn over the picture where it is
        // shown (the image keeps its aspect ratio inside its box).
        let motionAreas = null, motionNow = null;
        function drawAreas() {
          const live = liveMode === "WebRTC" ? $("live-video") : $("live"), layer = $("areas");
          const naturalWidth = live.videoWidth || live.naturalWidth || 0, naturalHeight = live.videoHeight || live.naturalHeight || 0;
          if (!motionAreas || !naturalWidth) { layer.replaceChildren(); return; }
          const scale = Math.min(live.clientWidth / naturalWidth, live.clientHeight / naturalHeight);
          const width = naturalWidth * scale, height = naturalHeight * scale;
          const left = live.offsetLeft + (live.clientWidth - width) / 2, top = live.offsetTop + (live.clientHeight - height) / 2;
          const areas = motionAreas.zones.map((r) => [r, "zone"]).concat(motionAreas.masks.map((r) => [r, "mask"]),
                                                                          motionNow ? [[motionNow, "motion"]] : []);
          layer.replaceChildren(...areas.map(([r, kind]) => {
            const area = document.createElement("div");
            area.className = "area " + kind;
            area.style.left = (left + r[0] * width) + "px"; area.style.top = (top + r[1] * height) + "px";
            area.style.width = (r[2] * width) + "px"; area.style.height = (r[3] * height) + "px";
            return area;
          }));
        }
        window.addEventListener("resize", drawAreas);
        // An MJPEG image may never fire load: the areas follow the picture's size once a second too.
        setInterval(() => { if (motionAreas) drawAreas(); }, 1000);

        let cameraInterrupted = false;
        function showInterruption(reason) {
          $("banner").hidden = !reason;
          $("banner").textContent = reason ? "Camera interrupted: " + reason + " (it comes back by itself)" : "";
          cameraInterrupted = !!reason;
          showNoSignal();
        }

        // The live picture: WebRTC (WHEP at /whep) unless the browser cannot or the server will not, else MJPEG,
        // which works everywhere; the page says which. ?live=mjpeg or ?live=webrtc asks for one (webrtc: no
        // falling back). The MJPEG stream draws "NO SIGNAL" itself; over WebRTC the page does, on an
        // interruption and when frames stop coming.
        let liveMode = null, lastFrameAt = 0;
        const askedLive = new URLSearchParams(location.search).get("live");
        // With several cameras: the one picked (the server's status says which), whose picture the big view shows,
        // and how to end that view's WebRTC connection when another is picked.
        let pickedCamera = null, leaveLive = null;
        const cameraQuery = (separator) => pickedCamera ? separator + "camera=" + encodeURIComponent(pickedCamera) : "";

        function showLiveMode(mode, why) {
          liveMode = mode;
          $("live-mode").textContent = "Live view: " + mode + (why ? " (" + why + ")" : "");
          $("live-video").hidden = mode !== "WebRTC";
          $("live").hidden = mode !== "MJPEG";
          showNoSignal();
        }

        function showNoSignal() {
          const stalled = liveMode === "WebRTC" && performance.now() - lastFrameAt > 1500;
          $("no-signal").hidden = !(liveMode === "WebRTC" && (cameraInterrupted || stalled));
        }

        function playMJPEG(why) {
          showLiveMode("MJPEG", why);
          $("live").src = "/live.mjpg?" + Date.now() + cameraQuery("&");
        }

        function iceGathered(peer, limit) {
          if (peer.iceGatheringState === "complete") return Promise.resolve();
          return new Promise((done) => {
            peer.addEventListener("icegatheringstatechange", () => { if (peer.iceGatheringState === "complete") done(); });
            setTimeout(done, limit);
          });
        }

        async function playWebRTC() {
          if (!window.RTCPeerConnection) throw new Error("this browser has no WebRTC");
          const peer = new RTCPeerConnection({ iceServers: [] });
          peer.addTransceiver("video", { direction: "recvonly" });
          peer.addTransceiver("audio", { direction: "recvonly" });
          const stream = new MediaStream();
          peer.ontrack = (event) => { stream.addTrack(event.track); $("live-video").srcObject = stream; };
          // Shown while it connects: a video out of the layout presents no frame, and so would never start.
          $("live-video").hidden = false;
          $("live").hidden = true;
          await peer.setLocalDescription(await peer.createOffer());
          await iceGathered(peer, 2000);
          const response = await fetch("/whep" + cameraQuery("?"), { method: "POST", headers: { "Content-Type": "application/sdp" }, body: peer.localDescription.sdp });
          if (response.status !== 201) {
            peer.close();
            const text = await response.text();
            let reason = text;
            try { reason = JSON.parse(text).error || text; } catch (_) {}
            throw new Error(reason);
          }
          const resource = response.headers.get("Location");
          await peer.setRemoteDescription({ type: "answer", sdp: await response.text() });
          let replaced = false;
          const leave = () => { peer.close(); fetch(resource, { method: "DELETE", keepalive: true }).catch(() => {}); };
          window.addEventListener("pagehide", leave);
          leaveLive = () => { replaced = true; window.removeEventListener("pagehide", leave); leave(); };
          const video = $("live-video");
          // Each frame shown (where the browser tells of them; else as the playing time moves on).
          const onFrame = (call) => video.requestVideoFrameCallback ? video.requestVideoFrameCallback(call)
                                                                     : video.addEventListener("timeupdate", call, { once: true });
          const counted = () => { lastFrameAt = performance.now(); showNoSignal(); onFrame(counted); };
          onFrame(counted);
          await new Promise((done, failed) => {
            const limit = setTimeout(() => failed(new Error("no picture within 10 s")), 10000);
            onFrame(() => { clearTimeout(limit); done(); });
            peer.addEventListener("connectionstatechange", () => {
              if (peer.connectionState === "failed") { clearTimeout(limit); failed(new Error("the connection failed")); }
            });
          }).catch((error) => { window.removeEventListener("pagehide", leave); leave(); throw error; });
          showLiveMode("WebRTC");
          // A connection lost for good (the server restarted) starts over.
          peer.addEventListener("connectionstatechange", () => {
            if (!replaced && (peer.connectionState === "failed" || peer.connectionState === "closed")) {
              window.removeEventListener("pagehide", leave); leave(); setTimeout(startLive, 2000);
            }
          });
        }

        function startLive() {
          if (askedLive === "mjpeg") return playMJPEG("asked for");
          playWebRTC().catch((error) => {
            if (askedLive === "webrtc") { showLiveMode("none", "WebRTC failed: " + error.message); return; }
            playMJPEG("WebRTC failed: " + error.message);
          });
        }
        setInterval(showNoSignal, 500);

        // Another camera picked: the big view shows it from now on.
        function followPickedCamera(name) {
          if (name === pickedCamera) return;
          pickedCamera = name;
          if (liveMode === null && !leaveLive) return;
          if (leaveLive) { leaveLive(); leaveLive = null; }
          startLive();
        }

        // Several cameras: a small live view of each, its state, and a press picks it.
        function showCameras(cameras) {
          const strip = $("cameras");
          strip.hidden = !cameras || cameras.length < 2;
          if (strip.hidden) return;
          const names = cameras.map((camera) => camera.name).join(",");
          if (strip.dataset.names !== names) {
            strip.dataset.names = names;
            strip.replaceChildren(...cameras.map((camera) => {
              const button = document.createElement("button");
              button.type = "button"; button.dataset.camera = camera.name;
              const picture = document.createElement("img");
              picture.alt = camera.name + " live"; picture.src = "/live.mjpg?camera=" + encodeURIComponent(camera.name);
              const label = document.createElement("span"); label.className = "state";
              button.append(picture, label);
              button.onclick = () => command({ command: "switch", camera: camera.name });
              return button;
            }));
          }
          for (const camera of cameras) {
            const button = strip.querySelector('[data-camera="' + CSS.escape(camera.name) + '"]');
            button.setAttribute("aria-pressed", camera.selected ? "true" : "false");
            button.querySelector(".state").textContent = camera.name + (camera.recording ? " ● REC" : "")
              + (camera.interruption ? " (interrupted: " + camera.interruption + ")" : "");
          }
        }

        async function refreshStatus() {
          const status = await (await fetch("/api/status")).json();
          $("status").textContent = (status.cameraName && status.cameraSet ? status.cameraName + ": " : "") + status.camera
            + (status.testDevice ? " (the built-in test camera)" : "");
          showCameras(status.cameraSet);
          followPickedCamera(status.cameraSet ? status.cameraName : null);
          motionAreas = status.motion || null;
          motionNow = status.motion ? status.motion.now : null;
          drawAreas();
          showRecording(status.recording ? status.recording.path : null, status.recording && status.recording.paused);
          showInterruption(status.interruption);
          $("shutter").disabled = !status.photos;
          $("record").disabled = !status.movies;
          $("trigger").disabled = !status.movies;
          const select = $("camera");
          // One camera: the machine's cameras to swap it for; several: the set-up's, to pick among.
          const choices = status.cameraSet ? status.cameraSet.map((camera) => camera.name) : (status.cameras || []);
          select.replaceChildren(...choices.map((id) => {
            const option = document.createElement("option");
            option.value = id; option.textContent = id; option.selected = id === (status.cameraSet ? status.cameraName : status.cameraID);
            return option;
          }));
        }

        // The gallery pages through the photo library: newest first, filtered, several selected for one zip.
        const selected = new Set();
        let nextOffset = null, refreshing = null, refreshAgain = false;

        function libraryQuery(offset, limit) {
          const query = new URLSearchParams({ type: $("filter-type").value, offset: offset, limit: limit });
          if ($("filter-favorites").checked) query.set("favorites", "1");
          if ($("filter-album").value) query.set("album", $("filter-album").value);
          return "/api/library?" + query;
        }

        function showSelection() {
          $("download").disabled = selected.size === 0;
          $("download").textContent = selected.size ? "Download " + selected.size + " as zip" : "Download selected";
        }

        function figureFor(item) {
          const figure = document.createElement("figure");
          figure.className = "item " + item.kind;
          figure.dataset.name = item.name;
          figure.dataset.id = item.id;
          figure.classList.toggle("selected", selected.has(item.id));
          const link = document.createElement("a");
          link.href = item.url;
          const image = document.createElement("img");
          image.loading = "lazy"; image.src = item.thumbnail; image.alt = item.name;
          link.append(image);
          const mark = document.createElement("div");
          mark.className = "mark";
          const choose = document.createElement("input");
          choose.type = "checkbox"; choose.className = "select"; choose.checked = selected.has(item.id);
          choose.setAttribute("aria-label", "select " + item.name);
          choose.onchange = () => {
            if (choose.checked) selected.add(item.id); else selected.delete(item.id);
            figure.classList.toggle("selected", choose.checked);
            showSelection();
          };
          const star = document.createElement("button");
          star.type = "button"; star.className = "favorite"; star.textContent = "★";
          star.setAttribute("aria-pressed", item.favorite ? "true" : "false");
          star.setAttribute("aria-label", "favourite");
          star.onclick = () => setFavorite(item.id, star.getAttribute("aria-pressed") !== "true");
          mark.append(choose, star);
          const caption = document.createElement("figcaption");
          const download = document.createElement("a");
          download.href = item.url + "?download=1"; download.textContent = item.name;
          if (item.event) figure.classList.add("event");
          if (item.timelapse) figure.classList.add("timelapse");
          caption.append(download, item.event ? " (event)" : "", item.timelapse ? " (timelapse)" : "", item.unfinished ? " (unfinished)" : "");
          figure.append(link, mark, caption);
          return figure;
        }

        async function loadPage(offset, limit) {
          const response = await fetch(libraryQuery(offset, limit));
          const page = await response.json();
          if (!response.ok) { say(page.error || "the gallery cannot be read", true); return null; }
          nextOffset = page.next;
          $("more").hidden = page.next === null;
          $("count").textContent = page.total + (page.total === 1 ? " item" : " items");
          return page;
        }

        // Reloads what is shown (at least a page); a change arriving meanwhile reloads once more after.
        async function refreshGallery() {
          if (refreshing) { refreshAgain = true; return refreshing; }
          refreshing = (async () => {
            do {
              refreshAgain = false;
              const shown = Math.min(500, Math.max(60, $("gallery").children.length));
              const page = await loadPage(0, shown);
              if (page) $("gallery").replaceChildren(...page.items.map(figureFor));
            } while (refreshAgain);
          })();
          try { await refreshing; } finally { refreshing = null; }
        }

        async function showMore() {
          if (nextOffset === null) return;
          const page = await loadPage(nextOffset, 60);
          if (page) $("gallery").append(...page.items.map(figureFor));
        }

        async function refreshAlbums() {
          const albums = (await (await fetch("/api/library/albums")).json()).albums || [];
          const select = $("filter-album"), chosen = select.value;
          select.replaceChildren(new Option("Every album", ""), ...albums.map((album) =>
            new Option(album.title + " (" + album.count + ")", album.id, false, album.id === chosen)));
        }

        async function setFavorite(id, favorite) {
          const response = await fetch("/api/library/favorite", { method: "POST", headers: { "Content-Type": "application/json" },
                                                                  body: JSON.stringify({ items: [id], favorite: favorite }) });
          if (!response.ok) say((await response.json()).error, true);
          refreshGallery();
        }

        function filtersChanged() { selected.clear(); showSelection(); $("gallery").replaceChildren(); refreshGallery(); }
        $("filter-type").onchange = filtersChanged;
        $("filter-favorites").onchange = filtersChanged;
        $("filter-album").onchange = filtersChanged;
        $("more").onclick = showMore;
        // A form post: the browser saves the answer as a download, however large, and the page stays.
        $("download").onclick = () => { $("zip-items").value = [...selected].join("\\n"); $("zip-form").submit(); };

        function logEvent(event) {
          const line = document.createElement("li");
          line.textContent = (event.cameraName ? event.cameraName + ": " : "") + event.event + (event.timelapse ? " (timelapse)" : "") + (event.path ? " " + event.path : "") + (event.reason ? " (" + event.reason + ")" : "")
            + (event.error ? ": " + event.error : "");
          $("events").prepend(line);
          while ($("events").children.length > 100) $("events").lastChild.remove();
        }

        function listen() {
          const events = new EventSource("/api/events");
          events.onmessage = (message) => {
            const event = JSON.parse(message.data);
            if (event.event === "recordingProgress") return;
            logEvent(event);
            // Another camera's recording, interruption or motion: its small view's state, not the big view's.
            if (event.cameraName && event.cameraName !== pickedCamera) {
              if (["photo", "recordingFinished", "recordingStarted", "eventStarted", "eventEnded"].includes(event.event)) refreshGallery();
              refreshStatus();
              return;
            }
            switch (event.event) {
              case "photo": case "recordingFinished": case "eventStarted": case "eventEnded": refreshGallery(); break;
              case "library": refreshGallery(); if (event.albumsChanged) refreshAlbums(); break;
              // The timelapse records beside `record`: the Record button is not its.
              case "recordingStarted": if (!event.timelapse) showRecording(event.path, false); refreshGallery(); break;
              case "recordingPaused": showRecording(recording, true); break;
              case "recordingResumed": showRecording(recording, false); break;
              case "motionBegan": motionNow = event.box; drawAreas(); break;
              case "motionEnded": motionNow = null; drawAreas(); break;
              case "interrupted": showInterruption(event.reason); break;
              case "interruptionEnded": showInterruption(null); break;
              case "cameraSwitched": case "cameraSelected": refreshStatus(); break;
            }
            if (event.event === "recordingFinished" && !event.timelapse) showRecording(null, false);
          };
          events.onopen = () => refreshStatus();
        }

        $("shutter").onclick = () => command({ command: "photo" });
        $("record").onclick = () => command(recording ? { command: "record", action: "stop" } : { command: "record", action: "start" });
        $("pause").onclick = () => command({ command: paused ? "resume" : "pause" });
        $("trigger").onclick = () => command({ command: "trigger" });
        $("switch").onclick = () => command({ command: "switch", camera: $("camera").value });
        // A live view that broke (the server restarted, the network dropped) is asked for again.
        $("live").onload = drawAreas;
        $("live").onerror = () => { if (liveMode === "MJPEG") setTimeout(() => { $("live").src = "/live.mjpg?" + Date.now() + cameraQuery("&"); }, 2000); };
        $("live-video").onresize = drawAreas;
        // The big view starts once the status has said which camera is picked.
        refreshStatus().catch(() => say("cannot reach the server", true)).finally(startLive);
        refreshGallery();
        refreshAlbums();
        listen();
        """

    static func login(message: String?) -> String {
        """
        <!doctype html>
        <html lang="en">
        <head><meta charset="utf-8"><title>gcapture: log in</title><link rel="stylesheet" href="/app.css"></head>
        <body>
        <header><h1>gcapture</h1></header>
        <main><form method="post" action="/login">
          <p>This camera needs the access token gcapture printed when it started.</p>
          \(message.map { "<p id=\"reply\" class=\"error\">\($0)</p>" } ?? "")
          <input name="token" type="password" autocomplete="current-password" aria-label="token" autofocus>
          <button type="submit">Log in</button>
        </form></main>
        </body>
        </html>
        """
    }

    static let movieIcon = """
        <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 160 120"><rect width="160" height="120" fill="#333"/>\
        <polygon points="62,38 62,82 102,60" fill="#ccc"/></svg>
        """
}
