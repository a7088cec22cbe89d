"""dali_lite's implementation, in rooms by concern (see docs/architecture.md).

Nothing here is public: users import the faces at DALI's paths (`dali_lite.pipeline`, `fn`,
`types`, `backend`, `tensors`, `plugin.*`), which only re-export. Arrows point down only:
pipeline -> execution, ops -> graph -> data -> types, errors, options, cuda.
"""
