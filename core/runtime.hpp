// Process-wide runtime state shared by the entry points.
#pragma once

#define TLRT_STR_(x) #x
#define TLRT_STR(x) TLRT_STR_(x)

namespace tlrt {

// The determinism switch (tlrt_set_deterministic), initialised from TORCHLEAN_RT_DETERMINISTIC.
bool deterministic() noexcept;
bool set_deterministic(bool on) noexcept;

}  // namespace tlrt
