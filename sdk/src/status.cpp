// Anchors libemmy_sdk's status helpers (header-only today).
#include "emmy/status.hpp"
