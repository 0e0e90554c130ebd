package host

import ()
