"""contiv's CNI plugin: a thin, fast shim forwarding each runtime call to the local contivd."""
