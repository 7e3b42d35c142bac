"""Running kernels on a CUDA device: the driver (``driver``), memory and ``DeviceArray``
(``memory``, ``dlpack``), other libraries' arrays and streams (``interop``), cubins in the disk
cache (``cubin_cache``) and the launcher of a compiled specialisation (``launch``)."""
