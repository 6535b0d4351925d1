/* journal — to be written */
