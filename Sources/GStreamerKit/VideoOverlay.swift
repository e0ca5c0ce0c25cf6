import CGst
import CGstShim

/// GStreamer's video overlay interface (GstVideoOverlay), which video sinks implement: drawing into a
/// window a toolkit owns, and where in that window.
extension Element {
    /// Whether the element, or an element inside it, is a video overlay.
    public var hasVideoOverlay: Bool { CGstShim_video_overlay_of(pointer) != nil }

    /// Draws into the window with this handle (an X11 Window id, a Wayland surface) instead of a window of
    /// the sink's own; 0 goes back to the sink's own window. Set it before the sink first receives caps:
    /// a sink that already made its window may keep it. False when there is no overlay to tell.
    @discardableResult
    public func setWindowHandle(_ handle: UInt) -> Bool {
        CGstShim_video_overlay_set_window_handle(pointer, guintptr(handle)) != 0
    }

    /// Where in its window the video is drawn, in window pixels. False when there
    /// is no overlay or it refused the rectangle (a sink that draws only whole windows, as ximagesink);
    /// width and height -1 are the whole window.
    @discardableResult
    public func setRenderRectangle(x: Int, y: Int, width: Int, height: Int) -> Bool {
        CGstShim_video_overlay_set_render_rectangle(pointer, gint(x), gint(y), gint(width), gint(height)) != 0
    }
}
