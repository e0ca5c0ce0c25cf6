"""The WebRTC test peers' HTTP (whep_client.py, gst_peer.py): one request to an endpoint on this machine."""
import urllib.error
import urllib.request

HTTP_TIMEOUT = 10
# No proxy from the environment: the endpoints are on this machine.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_request(method, url, headers, body=None):
    """(status, headers, body) of one request; an HTTP error status is an answer, not an exception."""
    request = urllib.request.Request(url, data=body, headers=headers, method=method)
    try:
        with OPENER.open(request, timeout=HTTP_TIMEOUT) as response:
            return response.status, response.headers, response.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read().decode(errors="replace")
