"""The type room, as ``nvidia.dali.types``: DALI's type vocabulary, one concern per module.

* ``enums``: ``DALIDataType``, ``DALIImageType`` and ``DALIInterpType`` with DALI's numeric
  values, and their members as module constants (``types.FLOAT``, ``types.RGB``);
* ``dtypes``: the conversions between DALI data types and NumPy (``to_numpy_type``,
  ``to_dali_type``), and the callable stand-in that ``TensorCPU.dtype`` returns;
* ``layout``: ``TensorLayout``;
* ``source_info``: ``SampleInfo`` and ``BatchInfo``, the records external-source callbacks get.

The public face ``dali_lite.types`` re-exports them; their classes name that face in
``__module__``. These modules import nothing but NumPy, so worker processes import them cheaply.
"""
