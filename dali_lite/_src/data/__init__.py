"""The data room: tensors on the CPU and the GPU, and the conversions of user data into them."""
