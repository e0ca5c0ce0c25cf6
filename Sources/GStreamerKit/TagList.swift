import CGst
import CGstShim
import Foundation

/// Metadata tags (GstTagList) for muxers that write them: EXIF in JPEG, udta in MP4.
public struct TagList: Sendable {
    enum Value: Sendable { case string(String), dateTime(Date), double(Double) }
    private(set) var values: [(String, Value)] = []

    public init() {}

    /// GST_TAG_* names: "device-manufacturer", "device-model", "application-name", "image-orientation"...
    public mutating func set(_ tag: String, _ value: String) { values.append((tag, .string(value))) }
    public mutating func set(_ tag: String, _ value: Double) { values.append((tag, .double(value))) }
    /// "datetime": becomes EXIF DateTimeOriginal.
    public mutating func set(_ tag: String, date: Date) { values.append((tag, .dateTime(date))) }

    func makeList() -> UnsafeMutablePointer<GstTagList>? {
        guard let list = gst_tag_list_new_empty() else { return nil }
        for (tag, value) in values {
            var gvalue = GValue()
            switch value {
            case .string(let text):
                g_value_init(&gvalue, CGstShim_type_string())
                g_value_set_string(&gvalue, text)
            case .double(let number):
                g_value_init(&gvalue, CGstShim_type_double())
                g_value_set_double(&gvalue, number)
            case .dateTime(let date):
                guard let dateTime = localDateTime(date) else { continue }
                g_value_init(&gvalue, gst_date_time_get_type())
                g_value_take_boxed(&gvalue, UnsafeRawPointer(dateTime))
            }
            gst_tag_list_add_value(list, GST_TAG_MERGE_REPLACE, tag, &gvalue)
            g_value_unset(&gvalue)
        }
        return list
    }

    /// The tags as a JPEG's EXIF APP1 segment payload ("Exif\0\0" and a TIFF block) for a picture of this
    /// size: device-manufacturer/model → Make/Model, application-name → Software, datetime → DateTime and
    /// DateTimeOriginal, image-orientation → Orientation, description → ImageDescription, with the tags
    /// EXIF requires of a JPEG (see ExifSegment). Other tags have no place there and are left out.
    public func exifSegment(pixelWidth: Int, pixelHeight: Int) -> Data {
        ExifSegment(values, pixelWidth: pixelWidth, pixelHeight: pixelHeight).data
    }

    /// "YYYY:MM:DD HH:MM:SS" in local time, as EXIF writes dates. strftime: a DateFormatter costs ~0.1 ms a call.
    /// The milliseconds of `date` past its second, as EXIF's SubSecTime tags hold them: "045".
    public static func exifSubseconds(_ date: Date) -> String {
        let milliseconds = Int((date.timeIntervalSince1970 - date.timeIntervalSince1970.rounded(.down)) * 1000)
        return String(format: "%03d", min(999, max(0, milliseconds)))
    }

    public static func exifDate(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var local = tm()
        localtime_r(&seconds, &local)
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: 32) { text in
            let length = strftime(text.baseAddress!, text.count, "%Y:%m:%d %H:%M:%S", &local)
            return String(decoding: UnsafeRawBufferPointer(start: text.baseAddress, count: length), as: UTF8.self)
        }
    }
}

/// The date in the local time zone, to the second. Made from localtime_r's fields: glib's local time zone
/// (g_date_time_new_from_unix_local) reads /etc/localtime again on every call when TZ is not set.
private func localDateTime(_ date: Date) -> OpaquePointer? {
    var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
    var local = tm()
    guard localtime_r(&seconds, &local) != nil else { return nil }
    return gst_date_time_new(Float(local.tm_gmtoff) / 3600, local.tm_year + 1900, local.tm_mon + 1, local.tm_mday,
                             local.tm_hour, local.tm_min, Double(local.tm_sec))
}

extension Element {
    /// Replaces the tags an element that writes metadata (jifmux, mp4mux) will write next.
    public func setTags(_ tags: TagList) {
        guard g_type_check_instance_is_a(reinterpret(pointer), gst_tag_setter_get_type()) != 0,
              let list = tags.makeList() else { return }
        let setter = OpaquePointer(pointer)
        gst_tag_setter_reset_tags(setter)
        gst_tag_setter_merge_tags(setter, list, GST_TAG_MERGE_REPLACE_ALL)
        gst_tag_list_unref(list)
    }
}
