/* manifest_publish — to be written */
