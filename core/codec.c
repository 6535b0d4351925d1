/* codec — to be written */
