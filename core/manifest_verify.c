/* manifest_verify — to be written */
