// Everything a hoop user needs.
#pragma once

#include "hoop/communicator.h"
#include "hoop/error.h"
#include "hoop/store.h"
#include "hoop/types.h"
#include "hoop/version.h"
