// The V4L2 control read: ioctl is variadic, which Swift cannot call.
#include "CDeviceServices.h"
#include <errno.h>
#include <fcntl.h>
#include <linux/videodev2.h>
#include <sys/ioctl.h>
#include <unistd.h>

int CDeviceServices_v4l2_read_control(const char *path, uint32_t control_id, int32_t *value) {
    int fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return errno;
    struct v4l2_control control = { .id = control_id, .value = 0 };
    int result = ioctl(fd, VIDIOC_G_CTRL, &control) == 0 ? 0 : errno;
    close(fd);
    if (result == 0) *value = control.value;
    return result;
}
