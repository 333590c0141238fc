// Helpers shared between teams (teams/shared/include, see ops.yaml defaults).
#pragma once

static inline float shared_clamp(float v, float lo, float hi) {
    return v < lo ? lo : (v > hi ? hi : v);
}
