// What identifies this machine and a new run: the host name, the machine id and fresh UUIDs.
// Shared by the recorder and by `grademl import`, which both create runs.
#pragma once

#include <string>

namespace grademl {

// A random (version 4) UUID, e.g. "1b4e28ba-2fa1-41d2-883f-0016d3cca427".
std::string NewUuid();
// gethostname(), "localhost" when it fails.
std::string HostName();
// /etc/machine-id (systemd; D-Bus's copy otherwise), "" when neither is readable.
std::string MachineId();

}  // namespace grademl
