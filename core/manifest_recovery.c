/* manifest_recovery — to be written */
